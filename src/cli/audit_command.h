// `yonder audit [--json] [--verify] [-n N]`: the provider's audit log, what
// peers asked this node to do and what it refused (docs/cli.md).
#pragma once

#include <cstdint>

#include "cli/context.h"

namespace yonder::cli {

// Exit code: kExitOk, or kExitAuditBroken when --verify finds the chain broken.
int cmd_audit(const Context& ctx, bool verify, int64_t limit);

}  // namespace yonder::cli
