// `yonder exec [-i] [-t] JOB [CMD ...]` (docs/cli.md): runs CMD (default
// `sh`) inside a running job, with a real PTY when -t is given, stdin
// forwarded with -i, window resizes forwarded, and the process's exit code
// as the command's own (125 when it could not be started).
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

struct ExecArgs {
  std::string job;
  std::vector<std::string> command;
  bool interactive = false;
  bool tty = false;
};

int cmd_exec(const Context& ctx, const ExecArgs& args);

}  // namespace yonder::cli
