// The body of the `yonder-relay` program (apps/yonder-relay parses the flags):
// key, logging, server, metrics, readiness and a clean stop on SIGTERM.
#pragma once

#include <string>

#include "relay/server.h"

namespace yonder::relay {

struct RelayOptions {
  std::string listen = "0.0.0.0:7851";
  std::string metrics = "127.0.0.1:7852";  // "off": no metrics endpoint
  std::string key_file;                    // created (0600) when missing
  int ready_fd = -1;                       // gets "ready\n" once both ports accept
  std::string log_level = "info";
  std::string dump_file;  // debugging: every relayed pipe byte is appended here
  RelayConfig config;
};

// Runs until SIGTERM or SIGINT; returns the process exit status (0 after a
// clean stop, 1 when it cannot start, with one line saying what to fix).
int run_relay(const RelayOptions& options);

}  // namespace yonder::relay
