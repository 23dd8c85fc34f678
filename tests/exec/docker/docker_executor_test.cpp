// The Docker backend against the real dockerd (label `integration`): the
// executor contract (exit codes, streams, log follow and resume, stop and
// kill, OOM, owned tasks and pids, exec, destroy; executor_contract.h), and
// what only Docker does: egress networks, hardening, exec with a TTY and
// resize, TTY logs, gVisor, and the refusals that must happen before
// anything is created.
#include "exec/docker/docker_executor.h"
#include "exec/docker/container_spec.h"
#include "exec/docker/engine_contract.h"
#include "exec/docker/small_task.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <thread>

#include "os/process.h"
#include "support/docker_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::exec::docker {
namespace {

using namespace std::chrono_literals;
using testing::kTestImage;

struct Output {
  std::string out, err;
  std::vector<std::pair<LogStream, std::string>> entries;
  std::vector<int64_t> times;
};

class DockerExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_DOCKER_OR_SKIP();
    executor_ = make("test-" + random_hex(12));
  }
  void TearDown() override {
    if (!executor_) return;
    auto owned = executor_->list_owned();
    if (owned) {
      for (auto& t : *owned) EXPECT_TRUE(executor_->destroy(t.handle, true).ok());
    }
  }
  // `tweak`: changes to the options before the executor is made.
  std::unique_ptr<DockerExecutor> make(const std::string& owner, const std::string& allow = "yonder-test/*",
                                       const std::string& pull = "never",
                                       const std::function<void(DockerOptions&)>& tweak = {}) {
    DockerOptions o;
    o.socket = testing::docker_socket();
    o.owner = owner;
    o.jobs_dir = dir_.path();
    o.images = *ImagePolicy::parse(allow, pull);
    if (tweak) tweak(o);
    return std::make_unique<DockerExecutor>(std::move(o));
  }
  TaskSpec spec(std::vector<std::string> cmd) { return small_task(std::move(cmd)); }
  Output logs(const TaskHandle& h, LogOptions options = {}) {
    Output o;
    auto st = executor_->logs(h, options, [&](LogStream s, int64_t t, std::string_view d) {
      (s == LogStream::kStderr ? o.err : o.out) += d;
      o.entries.emplace_back(s, std::string(d));
      o.times.push_back(t);
      return true;
    }, {});
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    return o;
  }

  testing::TempDir dir_;
  std::unique_ptr<DockerExecutor> executor_;
};

// Egress goes through a dedicated bridge network created on first use. The
// test listens on this machine only; the job reaches it through the
// network's gateway, and a job without egress cannot.
TEST_F(DockerExecutorTest, EgressJobsUseTheDedicatedNetwork) {
  std::string network = "yonder-egress-test-" + random_hex(8);
  auto egress_executor =
      make("test-" + random_hex(12), "yonder-test/*", "never", [&](DockerOptions& o) { o.egress_network = network; });
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string port = std::to_string(ntohs(addr.sin_port));
  std::string got;
  std::thread server([&] {
    int c = ::accept(lfd, nullptr, nullptr);
    if (c < 0) return;
    char buf[64];
    ssize_t n = ::read(c, buf, sizeof buf);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
    ::close(c);
  });
  auto s = spec({"sh", "-c", "gw=$(ip route | awk '/default/ {print $3}'); echo \"gw=$gw\"; "
                             "echo from-job | nc -w 5 $gw " + port + "; echo rc=$?"});
  s.network_egress = true;
  auto h = egress_executor->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = egress_executor->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  ::shutdown(lfd, SHUT_RDWR);
  ::close(lfd);
  server.join();
  std::string out;
  (void)egress_executor->logs(*h, {}, [&](LogStream, int64_t, std::string_view d) {
    out += d;
    return true;
  }, {});
  EXPECT_EQ(got, "from-job\n") << out;
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
  EXPECT_TRUE(egress_executor->destroy(*h, true).ok());
  // The same command without egress has no route at all.
  auto closed = executor_->start(spec({"sh", "-c", "ip route | grep -c default; echo x | nc -w 2 172.17.0.1 " + port +
                                                      "; echo rc=$?"}));
  ASSERT_TRUE(closed.ok());
  ASSERT_TRUE(executor_->wait(*closed, {}).ok());
  auto o2 = logs(*closed);
  EXPECT_NE(o2.out.find("0\n"), std::string::npos) << o2.out;
  EXPECT_EQ(o2.out.find("rc=0"), std::string::npos) << o2.out;
  auto rm = os::run_capture({"docker", "network", "rm", network});
  EXPECT_TRUE(rm.ok() && rm->exit_code == 0) << (rm.ok() ? rm->output : rm.error().to_string());
}

TEST_F(DockerExecutorTest, HardenedDefaultsHoldInsideTheContainer) {
  auto h = executor_->start(spec({"sh", "-c",
                                  "probe ids; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status; "
                                  "touch /rootfs-write 2>&1; cat /proc/net/dev | grep -c : ; echo $NVIDIA_VISIBLE_DEVICES; "
                                  "df -k /tmp | tail -1"}));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  ASSERT_TRUE(executor_->wait(*h, {}).ok());
  auto o = logs(*h);
  EXPECT_NE(o.out.find("uid=65534 euid=65534 gid=65534"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("CapEff:\t0000000000000000"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("NoNewPrivs:\t1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Read-only file system"), std::string::npos) << o.out;
  // /proc/net/dev: two header lines have ':'? No: only interface lines do; lo only.
  EXPECT_NE(o.out.find("\n1\n"), std::string::npos) << "only the loopback interface: " << o.out;
  EXPECT_NE(o.out.find("void\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" 8192 "), std::string::npos) << "tmpfs /tmp of 8 MiB: " << o.out;
}

TEST_F(DockerExecutorTest, ExecWithTtyAndResize) {
  auto h = executor_->start(spec({"sleep", "60"}));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto session = executor_->exec(*h, {{"sh"}, true, 24, 80});
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  ASSERT_TRUE((*session)->resize(40, 100).ok());
  ASSERT_TRUE((*session)->write("stty size; tty; exit 4\n").ok());
  auto got = contract::read_to_end(**session, 20s);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  std::string seen = got->out + got->err;
  EXPECT_NE(seen.find("40 100"), std::string::npos) << seen;
  EXPECT_NE(seen.find("/dev/pts/"), std::string::npos) << seen;
  auto code = (*session)->exit_code();
  ASSERT_TRUE(code.ok()) << code.error().to_string();
  EXPECT_EQ(*code, 4);
}

TEST_F(DockerExecutorTest, ExecWithoutTtySeparatesStreams) {
  auto h = executor_->start(spec({"sleep", "60"}));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto session = executor_->exec(*h, {{"sh", "-c", "echo o; echo e >&2; probe ids; exit 5"}, false});
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  (*session)->close_stdin();
  auto got = contract::read_to_end(**session, 20s);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->out, "o\nuid=65534 euid=65534 gid=65534 egid=65534\n");
  EXPECT_EQ(got->err, "e\n");
  EXPECT_EQ(*(*session)->exit_code(), 5);
}

// With a TTY the task's output is one stream of raw bytes (no frames); the
// working directory is made for the job's user when the upload lacks it
// (Docker would make it root's: the job could not write there).
TEST_F(DockerExecutorTest, TtyTaskLogsOneStreamAndItsWorkdirIsWritable) {
  TaskSpec s = spec({"sh", "-c", "test -t 1 && echo tty; pwd; touch made && echo wrote; echo err >&2; sleep 1; "
                                 "printf last"});
  s.tty = true;
  s.workdir = "/workspace/a/b";
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto o = logs(*h, {true, 0});
  EXPECT_EQ(o.out, "tty\r\n/workspace/a/b\r\nwrote\r\nerr\r\nlast");
  EXPECT_EQ(o.err, "");
  for (const auto& [stream, _] : o.entries) EXPECT_EQ(stream, LogStream::kStdout);
  ASSERT_GE(o.times.size(), 2u);
  auto resumed = logs(*h, {false, o.times[o.times.size() - 2]});  // after the time of "err"
  EXPECT_EQ(resumed.out, "last");
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_code, 0);
  struct stat st {};
  ASSERT_EQ(::stat((h->workspace + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(::stat((h->workspace + "/a/b/made").c_str(), &st), 0);

  // Without a TTY the same check fails: no terminal.
  auto plain = executor_->start(spec({"sh", "-c", "test -t 1 && echo tty; echo done"}));
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  EXPECT_EQ(logs(*plain, {true, 0}).out, "done\n");
}

TEST_F(DockerExecutorTest, AWorkdirThatIsAFileInTheUploadFailsClearly) {
  testing::TempDir seed;
  std::ofstream(seed / "notes") << "a file, not a folder\n";
  TaskSpec s = spec({"true"});
  s.seed_dir = seed.path();
  s.workdir = "/workspace/notes/sub";
  auto h = executor_->start(s);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().to_string().find("notes exists and is not a folder"), std::string::npos) << h.error().to_string();
}

TEST_F(DockerExecutorTest, ImageOutsideTheAllowlistIsRefusedNamingThePolicy) {
  auto s = spec({"true"});
  s.image = "busybox:latest";
  auto st = executor_->start(s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(st.error().message().find("executor.image_allowlist"), std::string::npos) << st.error().message();
  EXPECT_TRUE(executor_->list_owned()->empty());
}

TEST_F(DockerExecutorTest, PullPolicyNeverRefusesAMissingImage) {
  auto s = spec({"true"});
  s.image = "yonder-test/not-here:1";
  auto st = executor_->start(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("pull_policy is never"), std::string::npos) << st.error().message();
}

TEST_F(DockerExecutorTest, GpuJobWithoutNvidiaRuntimeFailsBeforeAnythingIsCreated) {
  if (executor_->fingerprint().gpu_capable) GTEST_SKIP() << "this engine has an NVIDIA runtime";
  auto s = spec({"true"});
  s.gpu_uuids = {"GPU-fake-0000-0000-0000-000000000000"};
  auto st = executor_->start(s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message().find("no NVIDIA runtime"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("nvidia-container-toolkit"), std::string::npos);
  EXPECT_TRUE(executor_->list_owned()->empty());
  // The same job on simulated GPUs (fake inventory in tests) runs.
  s.simulate_gpus = true;
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(executor_->wait(*h, {})->exit_code, 0);
}

// A share of a GPU in a real container: the guard the provider mounts
// read-only and preloads holds the job's CUDA allocations to the budget in
// its ledger. The driver is the TEST DOUBLE (tests/gpu/vram_guard/
// fake_libcuda.c), brought in with the job's uploaded files as a consumer
// would bring a program; the device is simulated.
TEST_F(DockerExecutorTest, AShareOfAGpuRunsWithTheProvidersGuardHoldingItsBudget) {
  // An image with a C library to preload into (the busybox test image is
  // static): the one with this machine's Python and its shared libraries.
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  auto built = testing::run({std::string(src != nullptr ? src : ".") + "/scripts/build-torch-double-image.sh"});
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  testing::TempDir seed;
  for (auto [from, to] : {std::pair{std::string(YONDER_VRAM_PROBE_PATH), "vram_probe"},
                          std::pair{std::string(YONDER_FAKE_CUDA_DIR) + "/libcuda.so.1", "libcuda.so.1"}}) {
    std::filesystem::copy_file(from, seed / to);
    std::filesystem::permissions(seed / to, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                               std::filesystem::perms::others_exec);
  }
  executor_ = make("test-" + random_hex(12), "yonder-test/*", "never",
                   [](DockerOptions& o) { o.vram_guard = YONDER_VRAM_GUARD_PATH; });
  auto s = spec({"sh", "-c",
                 "echo preload=$LD_PRELOAD; /workspace/vram_probe info alloc 48 alloc 32 free_all alloc 60; "
                 "{ echo x > " + std::string(kVramGuardPath) + "; } 2>&1; ls -lnd " + kVramLedgerDir});
  s.image = "yonder-test/torch-double:1";
  s.seed_dir = seed.path();
  s.env["LD_LIBRARY_PATH"] = "/workspace";
  s.gpu_uuids = {"GPU-fake-0000-0000-0000-000000000000"};
  s.simulate_gpus = true;
  s.vram_budget_bytes = 64ULL << 20;
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  ASSERT_EQ(executor_->wait(*h, {})->exit_code, 0);
  auto out = logs(*h).out;
  EXPECT_NE(out.find(std::string("preload=") + kVramGuardPath + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("info free=64 total=64"), std::string::npos) << "the budget is the device's size: " << out;
  EXPECT_NE(out.find("alloc 48 ok"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 32 error 2"), std::string::npos) << "past the budget: CUDA_ERROR_OUT_OF_MEMORY: " << out;
  EXPECT_NE(out.find("alloc 60 ok"), std::string::npos) << "freed memory is credited back: " << out;
  EXPECT_NE(out.find("Read-only file system"), std::string::npos) << "the job cannot replace the guard: " << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(drwx------\s+\d+\s+65534\s+65534\s)")))
      << "the ledger's folder is the job user's: " << out;
  ASSERT_TRUE(executor_->destroy(*h, true).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / (s.job_id + "/vram"))) << "the ledger goes with the task";
}

TEST_F(DockerExecutorTest, AShareOfAGpuIsRefusedWhenTheGuardIsMissing) {
  auto s = spec({"true"});
  s.gpu_uuids = {"GPU-fake-0000-0000-0000-000000000000"};
  s.simulate_gpus = true;
  s.vram_budget_bytes = 64ULL << 20;
  auto st = executor_->start(s);  // this executor has no gpu.vram_guard
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message().find("VRAM guard library is missing"), std::string::npos) << st.error().message();
  EXPECT_TRUE(executor_->list_owned()->empty());
}

TEST_F(DockerExecutorTest, GvisorWithoutTheRuntimeNamesIt) {
  // A runtime name this engine certainly lacks, so the refusal is tested
  // whether or not runsc is registered.
  DockerOptions o;
  o.socket = testing::docker_socket();
  o.owner = "test-" + random_hex(12);
  o.jobs_dir = dir_.path();
  o.images = *ImagePolicy::parse("yonder-test/*", "never");
  o.gvisor_runtime = "runsc-not-registered";
  DockerExecutor missing(std::move(o));
  auto s = spec({"true"});
  s.isolation = Isolation::kGvisor;
  auto st = missing.start(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("runsc-not-registered"), std::string::npos) << st.error().message();
}

TEST_F(DockerExecutorTest, GvisorJobRunsUnderTheUserSpaceKernel) {
  auto fp = executor_->fingerprint();
  if (std::find(fp.runtimes.begin(), fp.runtimes.end(), "runsc") == fp.runtimes.end()) {
    GTEST_SKIP() << "runsc is not registered with this engine (scripts/services.sh registers it when it starts "
                    "dockerd; see scripts/dockerd.json)";
  }
  auto s = spec({"sh", "-c", "dmesg | head -1; probe ids; echo ok > /workspace/out.txt && cat /workspace/out.txt"});
  s.isolation = Isolation::kGvisor;
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  auto o = logs(*h);
  EXPECT_EQ(exit->exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("gVisor"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("uid=65534"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ok\n"), std::string::npos) << "the workspace is writable under gVisor too: " << o.out;
}

// The engine refuses a container under 6 MiB of memory at create, after
// the executor has made the job's workspace.
TaskSpec refused_by_docker(const std::string&) {
  TaskSpec s = small_task({"true"});
  s.limits.memory_bytes = 4 << 20;
  return s;
}

using contract::ExecutorContract;
INSTANTIATE_TEST_SUITE_P(Docker, ExecutorContract,
                         ::testing::Values(contract::ContractBackendFactory{"docker", [] {
                           return std::make_unique<EngineContractBackend>(EngineContractBackend::Engine{
                               docker_unavailable, testing::docker_socket, refused_by_docker});
                         }}),
                         contract::contract_backend_name);

}  // namespace
}  // namespace yonder::exec::docker
