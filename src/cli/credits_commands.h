// `yonder credits [--json]` and `yonder receipts [--json] [--verify]`: the
// node's metering (docs/cli.md). Both first fetch receipts this
// node is still missing from its providers (GET /v1/credits, /v1/receipts).
#pragma once

#include "cli/context.h"

namespace yonder::cli {

int cmd_credits(const Context& ctx);
// Exit code: kExitOk, or kExitReceiptUnverified when --verify finds a
// receipt whose signatures do not verify (or that was refused).
int cmd_receipts(const Context& ctx, bool verify);

}  // namespace yonder::cli
