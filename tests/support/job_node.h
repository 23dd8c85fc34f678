// One Yonder node for integration tests with jobs: its own YONDER_HOME, a
// fake GPU inventory, loopback links, and (as a provider) the locally built
// test image allowed and small job defaults. Shared by the remote-jobs and
// forward/exec tests.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {

// Starts a node's daemon; by default on this host (the NAT lab starts it in
// one of its namespaces instead: NatLab::daemon_in).
using DaemonStarter = std::function<std::unique_ptr<Daemon>(const Env&)>;

class Node {
 public:
  // `extra`: more environment for the node's daemon and CLI (settings);
  // `config`: TOML appended to its config.toml before the daemon starts.
  Node(const TempDir& dir, const std::string& name, bool provider, const Env& extra = {},
       const std::string& config = "", DaemonStarter starter = nullptr)
      : home_(dir / name), starter_(std::move(starter)) {
    env_ = {{"YONDER_HOME", home_},
            {"YONDER_CONFIG", ""},
            {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
            {"YONDER_GPU_INVENTORY", "fake:2"},
            {"YONDER_PASSPHRASE", ""},
            {"YONDER_PASSPHRASE_FILE", ""},
            // No automatic known-answer benchmarks unless a test asks for them.
            {"YONDER_MESH_BENCHMARK_INTERVAL_S", "0"}};
    for (const auto& [k, v] : extra) env_[k] = v;
    if (provider) {
      env_["YONDER_IMAGE_ALLOWLIST"] = "yonder-test/*";
      env_["YONDER_PULL_POLICY"] = "never";
    }
    auto r = yonder({"init", "--name", name, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto init = nlohmann::json::parse(r.out, nullptr, false);
    if (init.is_object()) node_id_ = init.value("node_id", "");
    if (provider) {
      std::ofstream(home_ + "/config.toml", std::ios::app)
          << "[jobs]\ndefault_memory_mib = 64\ndefault_disk_mib = 16\nshm_mib = 8\npids_limit = 64\n"
             "stop_grace_s = 1\nmax_per_peer = 8\nmax_concurrent = 8\n";
    }
    if (!config.empty()) std::ofstream(home_ + "/config.toml", std::ios::app) << config;
    daemon_ = start_daemon();
    EXPECT_TRUE(daemon_->ready()) << daemon_->log();
  }
  // Stops the daemon, then removes the containers its jobs left behind (the
  // daemon keeps finished jobs' containers for logs and recovery).
  ~Node() {
    daemon_.reset();
    if (node_id_.empty()) return;
    auto ids = run({"/usr/bin/env", "docker", "ps", "-aq", "--filter", "label=yonder.owner=" + node_id_});
    std::vector<std::string> rm = {"/usr/bin/env", "docker", "rm", "-f"};
    size_t start = 0;
    while (start < ids.out.size()) {
      size_t nl = ids.out.find('\n', start);
      std::string id = ids.out.substr(start, nl - start);
      if (!id.empty()) rm.push_back(id);
      start = nl == std::string::npos ? ids.out.size() : nl + 1;
    }
    if (rm.size() > 4) run(rm);
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // `input`: what the command reads on stdin.
  RunResult yonder(std::vector<std::string> args, const std::string& input = "") const {
    args.insert(args.begin(), program_path("yonder"));
    return run(args, env_, input);
  }
  nlohmann::json yonder_json(std::vector<std::string> args) const {
    args.push_back("--json");
    auto r = yonder(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  // Pairs this node with `provider` under a share link made with `scope_args`.
  void pair_with(const Node& provider, std::vector<std::string> scope_args) const {
    scope_args.insert(scope_args.begin(), "share");
    std::string link = provider.yonder_json(scope_args)["link"];
    auto r = yonder({"pair", link});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string& home() const { return home_; }
  Daemon& daemon() { return *daemon_; }
  // Kills the daemon (SIGKILL, like a crash or power loss) and starts a new
  // one on the same link port, so paired peers find it again. `while_down`
  // runs between the two (the test acts while no daemon runs).
  void crash_and_restart(const std::function<void()>& while_down = nullptr) {
    int port = yonder_json({"status"}).value("link_port", 0);
    ::kill(daemon_->pid(), SIGKILL);
    daemon_->wait();
    daemon_.reset();
    if (while_down) while_down();
    env_["YONDER_LINK_LISTEN"] = "127.0.0.1:" + std::to_string(port);
    daemon_ = start_daemon();
    EXPECT_TRUE(daemon_->ready()) << daemon_->log();
  }
  const Env& env() const { return env_; }
  const std::string& node_id() const { return node_id_; }
  // Stops the daemon (SIGTERM), runs `while_down`, and starts it again with
  // `changes` to its environment (a node that moved: another address).
  void restart_with(const Env& changes, const std::function<void()>& while_down = nullptr) {
    daemon_.reset();
    if (while_down) while_down();
    for (const auto& [k, v] : changes) env_[k] = v;
    daemon_ = start_daemon();
    EXPECT_TRUE(daemon_->ready()) << daemon_->log();
  }
  // Stops the daemon now (SIGTERM) and starts it again, same settings.
  void restart() {
    daemon_.reset();
    daemon_ = start_daemon();
    EXPECT_TRUE(daemon_->ready()) << daemon_->log();
  }

 private:
  std::unique_ptr<Daemon> start_daemon() const {
    return starter_ ? starter_(env_) : std::make_unique<Daemon>(env_);
  }

  std::string home_;
  DaemonStarter starter_;
  std::string node_id_;
  Env env_;
  std::unique_ptr<Daemon> daemon_;
};

}  // namespace yonder::testing
