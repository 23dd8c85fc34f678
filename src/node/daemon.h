// yonderd's composition root: builds every subsystem in a fixed order, owns
// the event loop, and tears down in reverse on SIGTERM/SIGINT or a shutdown
// request.
#pragma once

#include <optional>
#include <string>

namespace yonder::node {

struct DaemonOptions {
  // When >= 0, "ready\n" is written to this file descriptor (then closed) once
  // the API socket accepts connections, so scripts and tests can wait for
  // readiness as an event instead of polling.
  int ready_fd = -1;
  std::optional<std::string> log_format;  // overrides log.format
};

// Exit codes (docs/cli.md): 0 clean shutdown, 1 could not start.
int run_daemon(const DaemonOptions& options);

}  // namespace yonder::node
