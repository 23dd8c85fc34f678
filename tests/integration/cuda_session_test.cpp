// Remote CUDA end to end: a provider and a consumer, each a real yonderd;
// `yonder cuda --on PROVIDER -- cuda_program ...` runs an unmodified
// driver-API program on the consumer, whose calls ride the peer link to a
// worker on the provider running them on the driver's TEST DOUBLE
// (tests/gpu/vram_guard/fake_libcuda.c, named by gpu.cuda_driver), directly
// or through a relay, refused without the capability, held to the scope's
// VRAM cap, cut by `deny`. No GPU and no Docker: the worker is a process of
// the provider's daemon.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/job_node.h"
#include "support/relay_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

const Env kProviderEnv = {{"YONDER_GPU_CUDA_DRIVER", YONDER_FAKE_CUDA_DIR "/libcuda.so.1"}};

TEST(CudaSession, AProgramHereRunsOnThePeersGpuThroughTheLink) {
  TempDir dir;
  Node studio(dir, "studio", true, kProviderEnv), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,cuda"});
  for (const char* scenario : {"session", "threads"}) {
    auto r = laptop.yonder({"cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, scenario});
    EXPECT_EQ(r.exit_code, 0) << scenario << "\n" << r.out << r.err;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
  // The program's bytes and kernels crossed (checked by the program), and
  // the provider audited each session.
  auto audit = studio.yonder({"audit"});
  EXPECT_NE(audit.out.find("cuda.session"), std::string::npos) << audit.out << audit.err;
}

TEST(CudaSession, WithoutTheCudaCapabilityTheProgramNeverStarts) {
  TempDir dir;
  Node studio(dir, "studio", true, kProviderEnv), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run"});
  auto r = laptop.yonder({"cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, "init"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.find("init"), std::string::npos) << r.out;  // the program did not run
  EXPECT_NE(r.err.find("`yonder allow"), std::string::npos) << r.err;
}

TEST(CudaSession, TheVramCapOfThePeersScopeHoldsTheSession) {
  TempDir dir;
  Node studio(dir, "studio", true, kProviderEnv), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,cuda", "--vram", "1G"});
  auto over = laptop.yonder({"cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, "alloc", "2048"});
  EXPECT_NE(over.out.find("alloc 2048 error 2"), std::string::npos) << over.out << over.err;  // out of memory
  auto within = laptop.yonder({"cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, "alloc", "512"});
  EXPECT_NE(within.out.find("alloc 512 ok"), std::string::npos) << within.out << within.err;
}

TEST(CudaSession, ASessionRidesTheRelayWhenThatIsTheOnlyPath) {
  TempDir dir;
  Relay relay = start_relay(dir / "relay.key", "127.0.0.1:0");
  ASSERT_FALSE(relay.node.empty()) << relay.process->output();
  Env env = kProviderEnv;
  env["YONDER_LINK_LISTEN"] = "";  // the provider listens nowhere: the relay is the only way in
  env["YONDER_LINK_RELAYS"] = relay.pinned();
  Node studio(dir, "studio", true, env, "[link]\nlisten = \"\"\n"), laptop(dir, "laptop", false);
  ASSERT_TRUE(wait_until([&] { return registered(studio, relay.listen); })) << studio.yonder({"netcheck"}).out;
  laptop.pair_with(studio, {"--scope", "run,cuda"});
  ASSERT_TRUE(wait_until([&] {
    auto peers = laptop.yonder_json({"peers"});
    return peers.contains("peers") && !peers["peers"].empty() && peers["peers"][0].value("path_kind", "") == "relay";
  })) << laptop.yonder({"peers"}).out;
  auto r = laptop.yonder({"cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, "session"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 MiB round trip in chunks ok"), std::string::npos) << r.out;
}

TEST(CudaSession, DenyCutsALiveSession) {
  TempDir dir;
  Node studio(dir, "studio", true, kProviderEnv), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,cuda"});
  std::string go = dir.path() + "/go";
  BackgroundProcess program(
      {program_path("yonder"), "cuda", "--on", "studio", "--", YONDER_CUDA_PROGRAM_PATH, "wait_for", go}, laptop.env());
  // The session is open once the provider has audited it.
  ASSERT_TRUE(wait_until([&] { return studio.yonder({"audit"}).out.find("cuda.session") != std::string::npos; }));
  ASSERT_EQ(studio.yonder({"deny", "laptop"}).exit_code, 0);
  std::ofstream(go) << "go";
  RunResult r = program.wait();
  EXPECT_NE(r.out.find("before 0 1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("after 46"), std::string::npos) << r.out << r.err;  // CUDA_ERROR_DEVICE_UNAVAILABLE
  EXPECT_NE(r.err.find("run it again"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace yonder::testing
