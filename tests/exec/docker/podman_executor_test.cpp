// The Docker backend against a real Podman API service (label
// `integration`): Podman's Docker-compatible API answers the same calls but
// drops a container's runtime and never reports an out-of-memory kill, and
// these tests hold the executor to the truth on both. The executor contract
// (executor_contract.h) runs here too, as the Podman instance.
//
// The fixture starts `podman system service` on a socket in a private
// folder, with its own storage, run and temp folders, so it shares nothing
// with dockerd or another Podman; the test image is copied in from Docker
// (docker save | podman load). Jobs have no network (the executor's
// default), so Podman touches no bridge and no iptables rule.
//
// Without YONDER_REQUIRE_PODMAN a host without podman skips these tests with
// the reason; scripts/test.sh sets it, so in CI a missing podman fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>

#include "exec/docker/docker_executor.h"
#include "exec/docker/engine_contract.h"
#include "exec/docker/small_task.h"
#include "os/files.h"
#include "os/unix_http.h"
#include "support/docker_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::exec::docker {
namespace {

using namespace std::chrono_literals;
using testing::kTestImage;

bool podman_required() {
  const char* v = std::getenv("YONDER_REQUIRE_PODMAN");
  return v != nullptr && std::string(v) == "1";
}

// One private Podman service for the whole binary (starting one takes
// about a second); each test removes the containers it made.
class PodmanService {
 public:
  // "" when it answers, or why not.
  std::string start() {
    podman_ = os::find_in_path("podman");
    if (podman_.empty()) return "podman is not installed";
    // Podman gives every container RLIMIT_NOFILE and RLIMIT_NPROC of its
    // own choosing (1048576, above a sandboxed root's hard limit: runc then
    // fails with EPERM). Limits below any host's keep the test portable.
    std::ofstream(dir_ / "containers.conf") << "[containers]\n"
                                               "default_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n";
    socket_ = dir_.path() + "/podman.sock";
    // Started in the private folder: conmon 2.1 writes an "oom" marker into
    // its working directory (Podman 4.3 looks elsewhere, hence the missing
    // OOMKilled), which must not land in the caller's.
    std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir_.path()};
    for (auto& a : flags({"system", "service", "--time=0", "unix://" + socket_})) argv.push_back(a);
    service_ = std::make_unique<testing::BackgroundProcess>(argv, env());
    bool up = testing::wait_until([&] {
      os::HttpRequestOptions options;
      options.timeout = 1000ms;
      auto r = os::unix_http_request(socket_, "GET", "/_ping", {}, options);
      return r.ok() && r->status == 200;
    }, 30s, 50ms);
    if (!up) return "podman system service did not answer on " + socket_ + ": " + stop_and_log();
    // Its own copy of the test image, from Docker (no registry here).
    std::string load = "docker save " + std::string(kTestImage) + " | " + join(flags({"load", "-q"}));
    auto loaded = testing::run({"/bin/sh", "-c", load}, env());
    if (loaded.exit_code != 0) return "loading the test image into Podman failed: " + loaded.out + loaded.err;
    return "";
  }
  // SIGTERM to the service this fixture started (its pid only), then reaped.
  std::string stop_and_log() {
    if (!service_) return "";
    ::kill(service_->pid(), SIGTERM);
    auto r = service_->wait();
    service_.reset();
    return r.err;
  }
  std::vector<std::string> flags(std::vector<std::string> args) const {
    std::vector<std::string> argv = {podman_,
                                     "--root", dir_.path() + "/storage",
                                     "--runroot", dir_.path() + "/run",
                                     "--tmpdir", dir_.path() + "/tmp",
                                     "--cgroup-manager", "cgroupfs",
                                     "--events-backend", "file"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  testing::Env env() const { return {{"CONTAINERS_CONF", dir_.path() + "/containers.conf"}}; }
  const std::string& socket() const { return socket_; }

 private:
  static std::string join(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
  }
  testing::TempDir dir_;
  std::string podman_, socket_;
  std::unique_ptr<testing::BackgroundProcess> service_;
};

// The service, started by the first test that needs it and stopped after
// the last one (a global environment), so the backend's own tests and its
// run of the executor contract share it.
std::unique_ptr<PodmanService>& podman_service() {
  static std::unique_ptr<PodmanService> service;
  return service;
}

class StopPodmanService : public ::testing::Environment {
 public:
  void TearDown() override {
    if (auto& service = podman_service()) {
      service->stop_and_log();
      service.reset();
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kStopPodmanService =
    ::testing::AddGlobalTestEnvironment(new StopPodmanService);

// Why Podman cannot be tested here, or nullopt once the service answers.
std::optional<contract::Unavailable> podman_unavailable() {
  if (os::find_in_path("podman").empty()) {
    if (podman_required()) {
      return contract::Unavailable{"YONDER_REQUIRE_PODMAN=1 but podman is not installed; run scripts/setup.sh (it "
                                   "installs podman and catatonit)", true};
    }
    return contract::Unavailable{"podman is not installed (run scripts/setup.sh, or set YONDER_REQUIRE_PODMAN=1 to fail)",
                                 false};
  }
  if (auto unavailable = docker_unavailable()) return unavailable;  // the test image comes from Docker
  static const std::string start_error = [] {
    podman_service() = std::make_unique<PodmanService>();
    return podman_service()->start();
  }();
  if (!start_error.empty()) return contract::Unavailable{start_error, true};
  return std::nullopt;
}

class PodmanExecutor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto unavailable = podman_unavailable()) {
      if (unavailable->required) FAIL() << unavailable->why;
      GTEST_SKIP() << unavailable->why;
    }
    DockerOptions o;
    o.socket = podman_service()->socket();
    o.owner = "test-" + random_hex(12);
    o.jobs_dir = dir_.path();
    o.images = *ImagePolicy::parse("yonder-test/*", "never");
    executor_ = std::make_unique<DockerExecutor>(std::move(o));
  }
  void TearDown() override {
    if (!executor_) return;
    auto owned = executor_->list_owned();
    ASSERT_TRUE(owned.ok()) << owned.error().to_string();
    for (auto& t : *owned) EXPECT_TRUE(executor_->destroy(t.handle, true).ok());
  }
  TaskSpec spec(std::vector<std::string> cmd) { return small_task(std::move(cmd)); }
  std::pair<std::string, std::string> logs(const TaskHandle& h) {
    std::string out, err;
    auto st = executor_->logs(h, {}, [&](LogStream s, int64_t, std::string_view d) {
      (s == LogStream::kStderr ? err : out) += d;
      return true;
    }, {});
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    return {out, err};
  }

  testing::TempDir dir_;
  std::unique_ptr<DockerExecutor> executor_;
};

TEST_F(PodmanExecutor, TheFingerprintNamesPodmanAndRefusesGpus) {
  auto fp = executor_->fingerprint();
  ASSERT_TRUE(fp.healthy) << fp.detail;
  EXPECT_EQ(fp.engine, "podman");
  EXPECT_EQ(fp.version.rfind("4.", 0), 0u) << fp.version;
  EXPECT_FALSE(fp.gpu_capable);
  EXPECT_NE(fp.gpu_detail.find("Podman"), std::string::npos) << fp.gpu_detail;
}

// Podman 4.3 ignores HostConfig.Runtime and lists runsc whether or not it
// is installed: a gVisor job would run on the host kernel and succeed.
TEST_F(PodmanExecutor, AJobAskingForGvisorIsRefusedNotRunOnTheHostKernel) {
  auto s = spec({"sh", "-c", "dmesg | head -1"});
  s.isolation = Isolation::kGvisor;
  auto h = executor_->start(s);
  ASSERT_FALSE(h.ok()) << "a gVisor job started on Podman";
  EXPECT_EQ(h.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(h.error().message().find("Podman"), std::string::npos) << h.error().message();
  EXPECT_NE(h.error().message().find("host kernel"), std::string::npos) << h.error().message();
  auto checked = executor_->check(s);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.error().code(), ErrorCode::kFailedPrecondition);
  auto owned = executor_->list_owned();
  ASSERT_TRUE(owned.ok());
  EXPECT_TRUE(owned->empty()) << "nothing is created for a refused job";
}

// The hardened defaults hold on Podman too: its read-only containers get
// writable /run and /var/tmp (read_only_tmpfs), bounded here like /tmp; the
// init process (Init=true) is catatonit, which Debian's podman only
// recommends: without it no container starts.
TEST_F(PodmanExecutor, TheRootIsReadOnlyWithEveryWritableTmpfsBoundedAndAnInit) {
  auto h = executor_->start(spec({"sh", "-c",
                                  "probe ids; touch /rootfs-write 2>&1; cat /proc/1/comm; "
                                  "for d in /tmp /run /var/tmp; do df -k $d | tail -1; done"}));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  auto [out, err] = logs(*h);
  EXPECT_EQ(exit->exit_code, 0) << out << err;
  EXPECT_NE(out.find("uid=65534 euid=65534 gid=65534"), std::string::npos) << out;
  EXPECT_NE(out.find("Read-only file system"), std::string::npos) << out;
  // Podman bind-mounts its init_path (catatonit) as /run/podman-init.
  EXPECT_NE(out.find("podman-init\n"), std::string::npos) << "PID 1 is Podman's init: " << out;
  for (const char* dir : {"/tmp", "/run", "/var/tmp"}) {
    bool bounded = false;
    for (size_t at = 0, nl; at < out.size(); at = nl + 1) {
      nl = out.find('\n', at);
      if (nl == std::string::npos) nl = out.size();
      std::string line = out.substr(at, nl - at);
      std::string tail = std::string(" ") + dir;
      bool is_dir = line.size() > tail.size() && line.compare(line.size() - tail.size(), tail.size(), tail) == 0;
      if (is_dir && line.rfind("tmpfs ", 0) == 0 && line.find(" 8192 ") != std::string::npos) bounded = true;
    }
    EXPECT_TRUE(bounded) << dir << " is a tmpfs of 8 MiB: " << out;
  }
}

// Podman runs a container of 4 MiB (Docker refuses one) and a missing
// program under its init; what fails on it is a working directory that is a
// file in the upload, found after the workspace is made.
TaskSpec refused_by_podman(const std::string& scratch) {
  std::string seed = scratch + "/seed";
  EXPECT_TRUE(os::make_dirs(seed, 0700).ok());
  std::ofstream(seed + "/notes") << "a file, not a folder\n";
  TaskSpec s = small_task({"true"});
  s.seed_dir = seed;
  s.workdir = "/workspace/notes/sub";
  return s;
}

using contract::ExecutorContract;
INSTANTIATE_TEST_SUITE_P(Podman, ExecutorContract,
                         ::testing::Values(contract::ContractBackendFactory{"podman", [] {
                           return std::make_unique<EngineContractBackend>(EngineContractBackend::Engine{
                               podman_unavailable, [] { return podman_service()->socket(); }, refused_by_podman});
                         }}),
                         contract::contract_backend_name);

}  // namespace
}  // namespace yonder::exec::docker
