// Remote CUDA end to end on one machine: an unmodified driver-API program
// (cuda_program.c) with the stand-in libcuda.so.1 first on its library
// path, talking over a unix socket to yonder-cuda-worker, which runs the
// calls on the driver's TEST DOUBLE (tests/gpu/vram_guard/fake_libcuda.c)
// and its test kernels. The same worker under the VRAM guard holds a
// session to its budget.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <memory>
#include <string>

#include "gpu/vram_guard/ledger.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

class RemoteSession : public ::testing::Test {
 protected:
  // Starts a worker on the test double; `env` is the worker's.
  void start_worker(const Env& env = {}) {
    socket_ = dir_.path() + "/cuda.sock";
    worker_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{YONDER_CUDA_WORKER_PATH, "--listen", socket_, "--driver",
                                 std::string(YONDER_FAKE_CUDA_DIR) + "/libcuda.so.1"},
        env);
    struct stat st {};
    ASSERT_TRUE(wait_until([&] { return ::stat(socket_.c_str(), &st) == 0; })) << "the worker never listened";
  }

  RunResult program(const std::vector<std::string>& args) {
    std::vector<std::string> argv{YONDER_CUDA_PROGRAM_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {{"LD_LIBRARY_PATH", YONDER_CUDA_STANDIN_DIR}, {"YONDER_CUDA_SOCKET", socket_}});
  }

  RunResult finish_worker() { return worker_->wait(); }

  TempDir dir_;
  std::string socket_;
  std::unique_ptr<BackgroundProcess> worker_;
};

TEST_F(RemoteSession, AProgramRunsOnTheRemoteDriverWithItsBytesAndKernelsIntact) {
  start_worker();
  RunResult r = program({"session"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 MiB round trip in chunks ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saxpy ran after the memset, on the stream ok"), std::string::npos) << r.out;
  RunResult w = finish_worker();
  EXPECT_EQ(w.exit_code, 0) << w.err;  // the program's exit ended the session cleanly
}

TEST_F(RemoteSession, AFailureOfAFireAndForgetCallSurfacesAtTheNextCallThatWaits) {
  start_worker();
  RunResult r = program({"deferred"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The stand-in says which call failed, and where it is reported.
  EXPECT_NE(r.err.find("an earlier cuMemcpyHtoD_v2 failed on the GPU with error 1; reported at cuDeviceGetCount"),
            std::string::npos)
      << r.err;
}

TEST_F(RemoteSession, AHandleTheWorkerNeverHandedOutIsRefusedWithoutReachingTheDriver) {
  start_worker();
  RunResult r = program({"bad_handle"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(RemoteSession, ThreadsShareTheSessionEachWithItsOwnCurrentContext) {
  start_worker();
  RunResult r = program({"threads"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

// What NVIDIA's driver-API samples use besides the calls above: their own
// context (created, pushed, popped, destroyed), a module from a file and
// its global, pinned and registered host memory, the other memsets.
TEST_F(RemoteSession, TheCallsOfTheDriverApiSamplesWork) {
  start_worker();
  RunResult r = program({"samples", dir_.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the destroyed context popped, the one below current ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the global written and read back ok"), std::string::npos) << r.out;
  RunResult w = finish_worker();
  EXPECT_EQ(w.exit_code, 0) << w.err;
}

TEST_F(RemoteSession, AChildForkedAfterCudaBeganCannotUseItAndTheParentGoesOn) {
  start_worker();
  RunResult r = program({"fork"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(RemoteSession, WithoutASocketTheProgramIsToldHowToReachAGpu) {
  RunResult r = run({YONDER_CUDA_PROGRAM_PATH, "init"},
                    {{"LD_LIBRARY_PATH", YONDER_CUDA_STANDIN_DIR}, {"YONDER_CUDA_SOCKET", ""}});
  EXPECT_NE(r.out.find("init 100"), std::string::npos) << r.out;  // CUDA_ERROR_NO_DEVICE
  EXPECT_NE(r.err.find("yonder cuda --on PEER -- PROGRAM"), std::string::npos) << r.err;
}

TEST_F(RemoteSession, AWorkerUnderTheVramGuardHoldsTheSessionToItsBudget) {
  std::string ledger = dir_.path() + "/ledger";
  ASSERT_EQ(yonder_vram_ledger_create(ledger.c_str(), 1024ull << 20), 0);
  start_worker({{"LD_PRELOAD", YONDER_VRAM_GUARD_PATH}, {"YONDER_VRAM_LEDGER", ledger}});
  RunResult r = program({"alloc", "2048"});
  EXPECT_NE(r.out.find("alloc 2048 error 2"), std::string::npos) << r.out << r.err;  // out of memory
  finish_worker();
  start_worker({{"LD_PRELOAD", YONDER_VRAM_GUARD_PATH}, {"YONDER_VRAM_LEDGER", ledger}});
  r = program({"alloc", "512"});
  EXPECT_NE(r.out.find("alloc 512 ok"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace yonder::testing
