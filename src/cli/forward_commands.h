// Port forwarding from the command line (docs/cli.md): `yonder forward JOB
// LOCAL:REMOTE` asks the local daemon to listen on 127.0.0.1:LOCAL and carry
// each connection to port REMOTE inside the job; it returns once the
// listener is up. --list and --stop manage the daemon's forwards.
#pragma once

#include <string>

#include "cli/context.h"

namespace yonder::cli {

int cmd_forward(const Context& ctx, const std::string& job, const std::string& ports);
int cmd_forward_list(const Context& ctx);
int cmd_forward_stop(const Context& ctx, const std::string& forward_id);

}  // namespace yonder::cli
