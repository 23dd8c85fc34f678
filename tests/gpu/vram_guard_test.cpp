// The VRAM guard (src/gpu/vram_guard): its ledger on its own, then the guard
// preloaded into vram_probe, a CUDA driver client, against a TEST DOUBLE of
// the driver (tests/gpu/vram_guard/fake_libcuda.c, a libcuda.so.1 of ours
// on a pretend 16 GiB device): a budget refused over every way in (linked,
// dlsym, cuGetProcAddress, async with the per-thread stream, managed,
// cuMemCreate), cuMemGetInfo and NVML (the two-GPU NVML stub, as
// libnvidia-ml.so.1) reporting the budget, one budget across the processes
// of a job, and what happens without a ledger or with a bad one.
#include "gpu/vram_guard/ledger.h"

#include "gpu/cuda/driver_api.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

// ---- The ledger ----

TEST(VramLedger, ChargesWithinTheBudgetAcrossProcessesAndFreesTheSlotsOfProcessesThatAreGone) {
  TempDir dir;
  std::string path = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(path.c_str(), 1000 * kMiB), 0);
  yonder_vram_open ledger{};
  ASSERT_EQ(yonder_vram_ledger_open(path.c_str(), &ledger), 0);
  EXPECT_EQ(yonder_vram_ledger_budget(&ledger), 1000 * kMiB);
  // A second process of the job: a child that waits for its pipe to close.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[1]);
    char c;
    while (read(pipe_fds[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(pipe_fds[0]);
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, getpid(), 600 * kMiB), 0);
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, child, 300 * kMiB), 0);
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, getpid(), 200 * kMiB), -ENOMEM);  // 1,100 > 1,000
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, getpid(), UINT64_MAX), -ENOMEM);  // no overflow
  EXPECT_EQ(yonder_vram_ledger_used(&ledger), 900 * kMiB);
  yonder_vram_ledger_credit(&ledger, getpid(), 100 * kMiB);
  EXPECT_EQ(yonder_vram_ledger_used(&ledger), 800 * kMiB);
  yonder_vram_ledger_credit(&ledger, getpid(), 10'000 * kMiB);  // never below zero
  EXPECT_EQ(yonder_vram_ledger_used(&ledger), 300 * kMiB);
  // The child ends without giving its memory back (its driver context did):
  // its slot is freed at the next change.
  close(pipe_fds[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(yonder_vram_ledger_used(&ledger), 0u);
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, getpid(), 1000 * kMiB), 0);
  yonder_vram_ledger_close(&ledger);
}

TEST(VramLedger, ABadFileIsNoLedgerAndEverySlotTakenByALiveProcessIsSaid) {
  TempDir dir;
  std::string junk = dir.path() + "/junk";
  std::ofstream(junk) << "not a ledger";
  yonder_vram_open ledger{};
  EXPECT_EQ(yonder_vram_ledger_open(junk.c_str(), &ledger), -EPROTO);
  EXPECT_EQ(yonder_vram_ledger_open((dir.path() + "/none").c_str(), &ledger), -ENOENT);
  std::string path = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(path.c_str(), 1000 * kMiB), 0);
  ASSERT_EQ(yonder_vram_ledger_open(path.c_str(), &ledger), 0);
  for (auto& slot : ledger.map->slots) slot = {1, 0, 0};  // pid 1 lives as long as the machine
  EXPECT_EQ(yonder_vram_ledger_charge(&ledger, getpid(), kMiB), -ENOSPC);
  yonder_vram_ledger_close(&ledger);
}

// ---- The guard, preloaded into the probe ----

Env guarded(const std::string& ledger) {
  return {{"LD_PRELOAD", YONDER_VRAM_GUARD_PATH},
          {"LD_LIBRARY_PATH", YONDER_FAKE_CUDA_DIR},
          {"YONDER_VRAM_LEDGER", ledger}};
}

RunResult probe(const std::vector<std::string>& ops, const Env& env) {
  std::vector<std::string> argv = {YONDER_VRAM_PROBE_PATH};
  argv.insert(argv.end(), ops.begin(), ops.end());
  return run(argv, env);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(VramGuard, OverTheBudgetIsOutOfMemoryEveryWayInAndGetInfoReportsTheBudget) {
  TempDir dir;
  std::string ledger = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), 1024 * kMiB), 0);
  auto r = probe({"ctx", "info", "alloc", "600", "dlsym_alloc", "600", "proc_alloc", "600", "async", "600", "managed", "600",
                  "create", "600", "pitch", "1048576", "600", "dlsym_alloc", "400", "info", "free_all", "info",
                  "proc_alloc", "1000", "async", "24"},
                 guarded(ledger));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "ctx 0 ok\n"
            "info free=1024 total=1024\n"
            "alloc 600 ok\n"
            "dlsym_alloc 600 error 2\n"
            "proc_alloc 600 error 2\n"
            "async 600 error 2\n"
            "managed 600 error 2\n"
            "create 600 error 2\n"
            "pitch 1048576 error 2\n"
            "dlsym_alloc 400 ok\n"
            "info free=24 total=1024\n"
            "free_all - ok\n"
            "info free=1024 total=1024\n"
            "proc_alloc 1000 ok\n"
            "async 24 ok\n");
  EXPECT_EQ(count(r.err, "past its VRAM budget of 1024 MiB"), 1u) << r.err;  // said once
  EXPECT_NE(r.err.find("--vram"), std::string::npos) << r.err;
}

// CUDA arrays count by their elements: 8192 x 8192 floats are 256 MiB,
// 4096 x 4096 x 16 floats 1,024 MiB.
TEST(VramGuard, ArraysAreChargedByTheirElementsAndGivenBackWhenDestroyed) {
  TempDir dir;
  std::string ledger = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), 1024 * kMiB), 0);
  auto r = probe({"array", "8192", "8192", "info", "array3d", "4096", "4096", "16", "alloc", "768", "alloc", "1",
                  "free_all", "array3d", "4096", "4096", "16", "info"},
                 guarded(ledger));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "array 8192 ok\n"
            "info free=768 total=1024\n"
            "array3d 4096 error 2\n"
            "alloc 768 ok\n"
            "alloc 1 error 2\n"
            "free_all - ok\n"
            "array3d 4096 ok\n"
            "info free=0 total=1024\n");
  EXPECT_EQ(yonder_cuda_array_bytes(4096, 4096, 16, CU_AD_FORMAT_FLOAT, 1), 1024 * kMiB);
  EXPECT_EQ(yonder_cuda_array_bytes(100, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4), 400u);      // 0 extents count 1
  EXPECT_EQ(yonder_cuda_array_bytes(10, 10, 1, 0x7777, 2), 1600u);                        // unknown: 8 a channel
  EXPECT_EQ(yonder_cuda_array_bytes(UINT64_MAX / 2, 4, 1, CU_AD_FORMAT_FLOAT, 1), 0u);  // overflow
}

// NVML (nvidia-smi, a framework's memory checks) sees the share too: the
// stub's device 0 has 143,771 MiB, 1,024 of them used by others.
TEST(VramGuard, NvmlReportsTheBudgetAndWhatTheJobHoldsNotTheDevice) {
  TempDir dir;
  std::string ledger = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), 1024 * kMiB), 0);
  auto r = probe({"nvml", "alloc", "600", "nvml"}, guarded(ledger));
  EXPECT_EQ(r.out, "nvml total=1024 used=0 free=1024\nalloc 600 ok\nnvml total=1024 used=600 free=424\n") << r.err;
  Env unguarded = guarded(ledger);
  unguarded["LD_PRELOAD"] = "";
  EXPECT_EQ(probe({"nvml"}, unguarded).out, "nvml total=143771 used=1024 free=142747\n");
}

// A process of the job that keeps its stdin open, holding what it allocated.
class Holder {
 public:
  Holder(const std::vector<std::string>& ops, const Env& env) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv = {const_cast<char*>(YONDER_VRAM_PROBE_PATH)};
      for (const auto& op : ops) argv.push_back(const_cast<char*>(op.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  ~Holder() {
    end();
    if (stdout_ >= 0) close(stdout_);
  }
  // The next line it prints ("" at its end; a bound for a broken build, not a timing).
  std::string line() {
    std::string got;
    char c;
    while (true) {
      pollfd p{stdout_, POLLIN, 0};
      if (poll(&p, 1, 60'000) <= 0 || read(stdout_, &c, 1) != 1) return got;
      if (c == '\n') return got;
      got += c;
    }
  }
  // Closes its stdin and reaps it.
  void end() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
};

TEST(VramGuard, OneBudgetHoldsAcrossTheProcessesOfAJobAndAProcessThatEndsGivesItsShareBack) {
  TempDir dir;
  std::string ledger = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), 1024 * kMiB), 0);
  Holder first({"alloc", "700", "hold"}, guarded(ledger));
  ASSERT_EQ(first.line(), "alloc 700 ok");
  auto second = probe({"alloc", "400", "alloc", "300", "info"}, guarded(ledger));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "alloc 400 error 2\nalloc 300 ok\ninfo free=24 total=1024\n");
  // Both end without freeing: the driver gave their memory back with their
  // contexts, and the ledger frees their slots.
  first.end();
  auto third = probe({"alloc", "1024"}, guarded(ledger));
  EXPECT_EQ(third.out, "alloc 1024 ok\n") << third.err;
}

TEST(VramGuard, WithoutALedgerItPassesThroughAndWithABadOneItRefusesSayingWhy) {
  TempDir dir;
  auto free_run = probe({"alloc", "2048", "info"}, guarded(""));
  EXPECT_EQ(free_run.out, "alloc 2048 ok\ninfo free=14336 total=16384\n") << free_run.err;
  std::string junk = dir.path() + "/junk";
  std::ofstream(junk) << "not a ledger";
  auto refused = probe({"alloc", "1", "proc_alloc", "1"}, guarded(junk));
  EXPECT_EQ(refused.out, "alloc 1 error 2\nproc_alloc 1 error 2\n");
  EXPECT_EQ(count(refused.err, "cannot be used (not a ledger)"), 1u) << refused.err;
  // And the control: the test double itself refuses nothing within its 16 GiB.
  std::string ledger = dir.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), kMiB), 0);
  Env unguarded = guarded(ledger);
  unguarded["LD_PRELOAD"] = "";
  EXPECT_EQ(probe({"alloc", "2048"}, unguarded).out, "alloc 2048 ok\n");
}

}  // namespace
}  // namespace yonder::testing
