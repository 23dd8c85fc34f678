// A real yonderd with provider jobs for integration tests: its own state
// folder, the FAKE GPU inventory, the local test image allowed, small job
// limits, and helpers to call its local API and to wait for job events
// (log long-polls, not sleeps).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "os/unix_http.h"
#include "support/api_token.h"
#include "support/docker_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {

struct ApiResult {
  int status = 0;
  nlohmann::json body;
};

class ProviderNode {
 public:
  explicit ProviderNode(const std::string& extra_toml = "") {
    env_ = {{"YONDER_HOME", dir_ / "home"},
            {"YONDER_CONFIG", ""},
            {"YONDER_GPU_INVENTORY", "fake:2"},
            {"YONDER_IMAGE_ALLOWLIST", "yonder-test/*"},
            {"YONDER_PULL_POLICY", "never"},
            {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
            {"YONDER_PASSPHRASE", ""},
            {"YONDER_PASSPHRASE_FILE", ""}};
    auto r = run({program_path("yonder"), "init", "--name", "provider"}, env_);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ofstream(dir_ / "home/config.toml")
        << "[jobs]\ndefault_memory_mib = 64\ndefault_disk_mib = 16\nshm_mib = 8\npids_limit = 64\n"
           "stop_grace_s = 1\nlog_max_bytes = 1048576\nmax_per_peer = 8\nmax_concurrent = 8\n"
        << extra_toml;
    start();
  }
  ~ProviderNode() {
    // Stop every job this node still has, then the daemon; remove what is left.
    if (daemon_ && daemon_->ready()) {
      auto jobs = api("GET", "/v1/provider/jobs");
      if (jobs.status == 200) {
        for (auto& j : jobs.body) {
          std::string id = j["job_id"];
          if (j["state"] == "running" || j["state"] == "starting" || j["state"] == "pending") {
            api("POST", "/v1/provider/jobs/stop", {{"job_id", id}});
            await_end(id);
          }
          api("POST", "/v1/provider/jobs/remove", {{"job_id", id}});
        }
      }
    }
    daemon_.reset();
  }

  void start() {
    daemon_ = std::make_unique<Daemon>(env_);
    ASSERT_TRUE(daemon_->ready()) << daemon_->log();
    node_id_ = api("GET", "/v1/status").body.value("node_id", "");
  }
  // kill -9: no shutdown code runs.
  void kill9() {
    ::kill(daemon_->pid(), SIGKILL);
    daemon_->wait();
  }

  ApiResult api(const std::string& method, const std::string& target, const nlohmann::json& body = nullptr) const {
    os::HttpRequestOptions o;
    o.timeout = std::chrono::seconds(90);
    o.bearer_token = api_token(dir_ / "home");
    auto r = os::unix_http_request(dir_ / "home/yonderd.sock", method, target, body.is_null() ? "" : body.dump(), o);
    if (!r) return {0, {{"error", r.error().to_string()}}};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  nlohmann::json submit(nlohmann::json request, int expect_status = 200) const {
    request["image"] = kTestImage;
    auto r = api("POST", "/v1/provider/jobs", request);
    EXPECT_EQ(r.status, expect_status) << r.body.dump();
    return r.body;
  }
  nlohmann::json job(const std::string& id) const { return api("GET", "/v1/provider/jobs?id=" + id).body; }

  struct Logs {
    std::string out, err, notice;
    uint64_t next_offset = 0;
    bool ended = false;
    size_t records = 0;
  };
  // One long-poll read from `offset` (waits up to wait_ms for output or the end).
  Logs logs(const std::string& id, uint64_t offset, int wait_ms = 0) const {
    auto r = api("GET", "/v1/provider/jobs/logs?id=" + id + "&offset=" + std::to_string(offset) +
                            "&wait_ms=" + std::to_string(wait_ms));
    EXPECT_EQ(r.status, 200) << r.body.dump();
    Logs l;
    if (r.status != 200) return l;
    for (auto& rec : r.body["records"]) {
      auto bytes = base64_decode(rec["data"].get<std::string>());
      std::string text(bytes->begin(), bytes->end());
      (rec["stream"] == "stderr" ? l.err : rec["stream"] == "notice" ? l.notice : l.out) += text;
      ++l.records;
    }
    l.next_offset = r.body["next_offset"];
    l.ended = r.body["ended"];
    return l;
  }
  // Reads until the job ends; everything it wrote.
  Logs await_end(const std::string& id) const {
    Logs all;
    for (int i = 0; i < 2000 && !all.ended; ++i) {
      Logs l = logs(id, all.next_offset, 30000);
      all.out += l.out;
      all.err += l.err;
      all.notice += l.notice;
      all.records += l.records;
      all.next_offset = l.next_offset;
      all.ended = l.ended;
    }
    EXPECT_TRUE(all.ended) << "job " << id << " did not end";
    return all;
  }
  // Waits for the first output of a job (it is running).
  Logs await_output(const std::string& id) const {
    Logs l = logs(id, 0, 30000);
    EXPECT_GT(l.records, 0u) << "job " << id << " wrote nothing within 30 s: " << job(id).dump();
    return l;
  }

  const std::string& home() const { return env_.at("YONDER_HOME"); }
  const std::string& node_id() const { return node_id_; }
  Daemon& daemon() { return *daemon_; }

 private:
  TempDir dir_;
  Env env_;
  std::unique_ptr<Daemon> daemon_;
  std::string node_id_;
};

}  // namespace yonder::testing
