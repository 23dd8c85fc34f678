// The abuse suite: what a hostile job tries, one named test each, against
// the real yonderd and dockerd with the hardened defaults. Throughout each
// test a prober asks the daemon for /v1/status; every answer must come, and
// quickly (the daemon's event loop never waits on a job).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "support/provider_node.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;

class Abuse : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_DOCKER_OR_SKIP();
    node_ = std::make_unique<ProviderNode>();
    prober_ = std::thread([this] {
      // A bounded request loop, paced so it does not compete with the job.
      for (int i = 0; i < 6000 && !done_.load(); ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto r = node_->api("GET", "/v1/status");
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        ++answered_;
        if (r.status != 200) ++failed_;
        max_ms_ = std::max<int64_t>(max_ms_.load(), took.count());
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void TearDown() override {
    done_ = true;
    if (prober_.joinable()) prober_.join();
    if (node_) {
      EXPECT_EQ(failed_.load(), 0) << "the daemon failed status requests during the abuse";
      EXPECT_GT(answered_.load(), 0);
      EXPECT_LT(max_ms_.load(), 5000) << "the daemon stalled while the job ran";
      // Still healthy afterwards: an ordinary job runs.
      std::string ok = node_->submit({{"command", {"echo", "fine"}}})["job_id"];
      EXPECT_EQ(node_->await_end(ok).out, "fine\n");
    }
    node_.reset();
  }
  // Submits, waits for the end, returns (view, logs).
  std::pair<nlohmann::json, ProviderNode::Logs> run_job(nlohmann::json request) {
    std::string id = node_->submit(std::move(request))["job_id"];
    auto logs = node_->await_end(id);
    return {node_->job(id), logs};
  }

  std::unique_ptr<ProviderNode> node_;
  std::thread prober_;
  std::atomic<bool> done_{false};
  std::atomic<int> answered_{0}, failed_{0};
  std::atomic<int64_t> max_ms_{0};
};

TEST_F(Abuse, ForkBomb) {
  auto [v, logs] = run_job({{"wall_time_s", 4},
                            {"command", {"sh", "-c", "echo armed; bomb() { bomb | bomb & }; bomb; sleep 100"}}});
  EXPECT_NE(logs.out.find("armed"), std::string::npos);
  EXPECT_NE(logs.err.find("can't fork"), std::string::npos) << "PidsLimit stopped the bomb: " << logs.err.substr(0, 300);
  EXPECT_EQ(v["state"], "stopped");
  EXPECT_EQ(v["reason"], "wall_time");
}

TEST_F(Abuse, MemoryBombIsReportedAsOutOfMemory) {
  auto [v, logs] = run_job({{"memory_mib", 64}, {"command", {"probe", "mem", "1000"}}});
  EXPECT_EQ(v["state"], "exited");
  EXPECT_EQ(v["reason"], "out_of_memory") << v.dump();
  EXPECT_EQ(v["oom_killed"], true);
  EXPECT_NE(v["message"].get<std::string>().find("ran out of memory (limit 64 MiB)"), std::string::npos);
}

// The byte count after "write=ENOSPC bytes=" in the probe's output, or -1.
// (Not std::regex: GCC 12 reports a false maybe-uninitialized in <regex>
// under ASan, and warnings are errors.)
long long enospc_bytes(const std::string& out) {
  const std::string key = "write=ENOSPC bytes=";
  size_t at = out.find(key);
  if (at == std::string::npos) return -1;
  size_t end = out.find_first_not_of("0123456789", at + key.size());
  std::string digits = out.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
  return digits.empty() ? -1 : std::stoll(digits);
}

TEST_F(Abuse, WorkspaceDiskFillGetsEnospcAndTheHostIsUnharmed) {
  std::string id = node_->submit({{"disk_mib", 16}, {"command", {"sh", "-c", "probe fill /workspace/big; df -k /workspace | tail -1"}}})["job_id"];
  auto logs = node_->await_end(id);
  long long written = enospc_bytes(logs.out);
  ASSERT_GE(written, 0) << logs.out;
  EXPECT_LE(written, 16LL << 20);
  EXPECT_GT(written, 8LL << 20);
  // The image on the host can never grow past its size.
  struct stat st {};
  ASSERT_EQ(::stat((node_->home() + "/jobs/" + id + "/workspace.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 16LL << 20);
  EXPECT_LE(st.st_blocks * 512, 17LL << 20);
}

TEST_F(Abuse, EgressAttemptWithNetworkModeNone) {
  // A listener on the host's Docker bridge address (this machine), port 0:
  // reachable from any container with a network, unreachable from a job.
  auto net = os::unix_http_request(docker_socket(), "GET", "/v1.41/networks/bridge");
  std::string gateway;
  if (net && net->status == 200) {
    auto j = nlohmann::json::parse(net->body, nullptr, false);
    if (j.is_object() && j["IPAM"]["Config"].is_array() && !j["IPAM"]["Config"].empty()) {
      gateway = j["IPAM"]["Config"][0].value("Gateway", "");
    }
  }
  int port = 0;
  int fd = -1;
  if (!gateway.empty()) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, gateway.c_str(), &a.sin_addr);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  std::string probe = gateway.empty() ? "true" : "probe connect " + gateway + " " + std::to_string(port);
  auto [v, logs] = run_job({{"command", {"sh", "-c", "grep -c : /proc/net/dev; " + probe}}});
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(logs.out.substr(0, 2), "1\n") << "only the loopback interface: " << logs.out;
  if (!gateway.empty()) {
    EXPECT_NE(logs.out.find("connect=ENETUNREACH"), std::string::npos) << logs.out;
  }
}

TEST_F(Abuse, SetuidEscalationAttempt) {
  auto [v, logs] = run_job({{"command", {"sh", "-c", "ls -l /bin/probe-suid; probe-suid setuid"}}});
  EXPECT_NE(logs.out.find("-rwsr-xr-x"), std::string::npos) << "the binary really is set-user-id root: " << logs.out;
  EXPECT_NE(logs.out.find("setuid0=EPERM uid=65534 euid=65534"), std::string::npos) << logs.out;
  EXPECT_EQ(v["exit_code"], 1);
}

TEST_F(Abuse, WriteToTheRootFileSystem) {
  auto [v, logs] = run_job({{"command", {"sh", "-c", "touch /etc/owned; echo x > /bin/sh; touch /workspace/ok && echo workspace-writable"}}});
  EXPECT_NE(logs.err.find("/etc/owned: Read-only file system"), std::string::npos) << logs.err;
  EXPECT_NE(logs.err.find("Read-only file system"), std::string::npos);
  EXPECT_NE(logs.out.find("workspace-writable"), std::string::npos);
}

TEST_F(Abuse, DevShmFill) {
  auto [v, logs] = run_job({{"command", {"probe", "fill", "/dev/shm/big"}}});
  long long written = enospc_bytes(logs.out);
  ASSERT_GE(written, 0) << logs.out;
  EXPECT_LE(written, 8LL << 20);  // jobs.shm_mib = 8
}

TEST_F(Abuse, LogFlood) {
  auto [v, logs] = run_job({{"command", {"probe", "flood", "30000000"}}});
  EXPECT_EQ(v["log_truncated"], true) << v.dump();
  EXPECT_LE(v["log_bytes"].get<uint64_t>(), 1048576u);
  EXPECT_LE(logs.out.size(), 1048576u);
  EXPECT_NE(logs.notice.find("log truncated"), std::string::npos);
  EXPECT_NE(logs.notice.find("jobs.log_max_bytes"), std::string::npos);
}

TEST_F(Abuse, NvidiaVisibleDevicesAttempt) {
  for (const char* name : {"NVIDIA_VISIBLE_DEVICES", "nvidia_visible_devices", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}) {
    auto r = node_->api("POST", "/v1/provider/jobs", {{"image", kTestImage}, {"env", {{name, "all"}}}, {"command", {"true"}}});
    EXPECT_EQ(r.status, 403) << name << ": " << r.body.dump();
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(name), std::string::npos) << r.body.dump();
  }
  EXPECT_EQ(node_->api("GET", "/v1/provider/jobs").body.size(), 0u) << "nothing was queued";
  auto [v, logs] = run_job({{"command", {"sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"}}});
  EXPECT_EQ(logs.out, "void\n");
}

}  // namespace
}  // namespace yonder::testing
