// A real yonder-relay for integration tests, and what a node's netcheck says
// of it. Needs YONDER_BIN_YONDER_RELAY (program_path) in the test's environment.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/job_node.h"
#include "support/live_process.h"

namespace yonder::testing {

// A yonder-relay with its own key file, on `listen` ("127.0.0.1:0" for a
// fresh port).
struct Relay {
  std::unique_ptr<LiveProcess> process;
  std::string node, listen;
  std::string pinned() const { return listen + "@" + node; }
};

inline Relay start_relay(const std::string& key_file, const std::string& listen) {
  Relay r;
  r.process = std::make_unique<LiveProcess>(
      std::vector<std::string>{program_path("yonder-relay"), "--key-file", key_file, "--listen", listen, "--metrics",
                               "off"},
      Env{});
  // Logged after the node and listen lines are flushed to stdout.
  EXPECT_TRUE(r.process->wait_for("yonder-relay ready", std::chrono::seconds(20))) << r.process->output();
  r.node = line_value(r.process->out(), "node");
  r.listen = line_value(r.process->out(), "listen");
  return r;
}

// `node`'s relay entry for `address` in `yonder netcheck` (null if none).
inline nlohmann::json relay_entry(const Node& node, const std::string& address) {
  auto nc = node.yonder_json({"netcheck"});
  if (!nc.contains("relays")) return nlohmann::json();
  for (const auto& r : nc["relays"]) {
    if (r.value("address", "") == address) return r;
  }
  return nlohmann::json();
}

inline bool registered(const Node& node, const std::string& address) {
  return relay_entry(node, address).value("state", "") == "registered";
}

}  // namespace yonder::testing
