// `yonder dashboard`: asks yonderd for a one-time login URL (valid 60 s,
// single use; api/auth.h) and prints it, so a browser on this host gets a
// session cookie without ever seeing the API token.
#pragma once

#include "cli/context.h"

namespace yonder::cli {

int cmd_dashboard(const Context& ctx);

}  // namespace yonder::cli
