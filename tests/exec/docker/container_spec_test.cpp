// Every hardened default, field by field, in the body sent to Docker's
// POST /containers/create (the abuse suite then shows their effect).
#include "exec/docker/container_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace yonder::exec::docker {
namespace {

TaskSpec cpu_job() {
  TaskSpec s;
  s.job_id = "abc";
  s.image = "python:3";
  s.command = {"python", "-c", "print(1)"};
  s.env = {{"A", "1"}};
  s.limits.nano_cpus = 1'500'000'000;
  s.limits.memory_bytes = 1LL << 30;
  s.limits.pids = 256;
  s.limits.shm_bytes = 64 << 20;
  s.limits.tmp_bytes = 128 << 20;
  s.limits.log_file_bytes = 5 << 20;
  return s;
}

TEST(ContainerSpec, HardenedDefaults) {
  auto b = build_create_body(cpu_job(), {"node-1", "/h/jobs/abc/workspace", "runsc", "yonder-egress"});
  const auto& h = b["HostConfig"];
  EXPECT_EQ(b["User"], "65534:65534");
  EXPECT_EQ(h["CapDrop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(h["CapAdd"], nlohmann::json::array());
  EXPECT_EQ(h["SecurityOpt"], nlohmann::json::array({"no-new-privileges"}));
  EXPECT_EQ(h["Privileged"], false);
  EXPECT_EQ(h["ReadonlyRootfs"], true);
  EXPECT_EQ(h["PidsLimit"], 256);
  EXPECT_EQ(h["Memory"], 1LL << 30);
  EXPECT_EQ(h["MemorySwap"], h["Memory"]);
  EXPECT_EQ(h["NanoCpus"], 1'500'000'000);
  EXPECT_EQ(h["ShmSize"], 64 << 20);
  EXPECT_EQ(h["NetworkMode"], "none");
  EXPECT_EQ(b["NetworkDisabled"], true);
  EXPECT_EQ(h["IpcMode"], "private");
  EXPECT_EQ(h["LogConfig"]["Type"], "json-file");
  EXPECT_EQ(h["LogConfig"]["Config"]["max-size"], std::to_string(5 << 20));
  EXPECT_EQ(h["LogConfig"]["Config"]["max-file"], "2");
  EXPECT_EQ(h["Tmpfs"]["/tmp"], "rw,nosuid,nodev,size=134217728,mode=1777");
  EXPECT_EQ(h["Mounts"][0]["Source"], "/h/jobs/abc/workspace");
  EXPECT_EQ(h["Mounts"][0]["Target"], "/workspace");
  EXPECT_EQ(h["AutoRemove"], false);
  EXPECT_FALSE(h.contains("DeviceRequests"));
  EXPECT_FALSE(h.contains("Runtime"));
  EXPECT_EQ(b["Labels"]["yonder.owner"], "node-1");
  EXPECT_EQ(b["Labels"]["yonder.job"], "abc");
  EXPECT_EQ(b["Cmd"], nlohmann::json::array({"python", "-c", "print(1)"}));
  EXPECT_EQ(b["WorkingDir"], "/workspace");
  EXPECT_EQ(b["Tty"], false);
  EXPECT_EQ(b["OpenStdin"], false);
  // A CPU job is told explicitly that it has no GPU, in case the engine's
  // default runtime is nvidia and the image says NVIDIA_VISIBLE_DEVICES=all.
  EXPECT_EQ(b["Env"], nlohmann::json::array({"A=1", "NVIDIA_VISIBLE_DEVICES=void"}));
}

TEST(ContainerSpec, GpuJobGetsItsLeasedDevicesByUuidOnly) {
  TaskSpec s = cpu_job();
  s.gpu_uuids = {"GPU-aaa", "GPU-bbb"};
  auto b = build_create_body(s, {"n", "", "runsc", "e"});
  const auto& req = b["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(req.size(), 1u);
  EXPECT_EQ(req[0]["Driver"], "nvidia");
  EXPECT_EQ(req[0]["DeviceIDs"], nlohmann::json::array({"GPU-aaa", "GPU-bbb"}));
  EXPECT_FALSE(req[0].contains("Count"));  // never "all"
  EXPECT_EQ(b["Env"].back(), "NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  EXPECT_NE(std::find(b["Env"].begin(), b["Env"].end(), "NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"), b["Env"].end());
  EXPECT_FALSE(b["HostConfig"].contains("Mounts"));
  s.simulate_gpus = true;
  EXPECT_FALSE(build_create_body(s, {"n", "", "runsc", "e"})["HostConfig"].contains("DeviceRequests"));
}

// A share of a GPU: the guard read-only at a fixed path, preloaded ahead of
// what the job preloads itself, and its ledger's folder read-write.
TEST(ContainerSpec, AShareOfAGpuGetsTheVramGuardPreloadedWithItsLedger) {
  TaskSpec s = cpu_job();
  s.gpu_uuids = {"GPU-aaa"};
  s.vram_budget_bytes = 8ULL << 30;
  s.env["LD_PRELOAD"] = "/usr/lib/libjemalloc.so.2";
  CreateContext ctx{"n", "/h/jobs/abc/workspace", "runsc", "e"};
  ctx.vram_dir = "/h/jobs/abc/vram";
  ctx.vram_guard = "/usr/lib/yonder/libyonder-vram-guard.so";
  auto b = build_create_body(s, ctx);
  const auto& mounts = b["HostConfig"]["Mounts"];
  ASSERT_EQ(mounts.size(), 3u);
  EXPECT_EQ(mounts[1]["Source"], "/h/jobs/abc/vram");
  EXPECT_EQ(mounts[1]["Target"], kVramLedgerDir);
  EXPECT_EQ(mounts[1]["ReadOnly"], false);
  EXPECT_EQ(mounts[2]["Source"], "/usr/lib/yonder/libyonder-vram-guard.so");
  EXPECT_EQ(mounts[2]["Target"], kVramGuardPath);
  EXPECT_EQ(mounts[2]["ReadOnly"], true);
  std::vector<std::string> env = b["Env"].get<std::vector<std::string>>();
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("LD_PRELOAD=", 0) == 0; }), 1)
      << "one LD_PRELOAD: the job's own is folded into ours";
  EXPECT_NE(std::find(env.begin(), env.end(),
                      std::string("LD_PRELOAD=") + kVramGuardPath + " /usr/lib/libjemalloc.so.2"),
            env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "YONDER_VRAM_LEDGER=/run/yonder-vram/ledger"), env.end());
  // Without a share, the job's LD_PRELOAD is its own business.
  s.vram_budget_bytes = 0;
  auto plain = build_create_body(s, ctx);
  EXPECT_EQ(plain["HostConfig"]["Mounts"].size(), 1u);
  env = plain["Env"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(env.begin(), env.end(), "LD_PRELOAD=/usr/lib/libjemalloc.so.2"), env.end());
}

TEST(ContainerSpec, GvisorAndEgress) {
  TaskSpec s = cpu_job();
  s.isolation = Isolation::kGvisor;
  s.network_egress = true;
  auto b = build_create_body(s, {"n", "", "runsc", "yonder-egress"});
  EXPECT_EQ(b["HostConfig"]["Runtime"], "runsc");
  EXPECT_EQ(b["HostConfig"]["NetworkMode"], "yonder-egress");
  EXPECT_FALSE(b.contains("NetworkDisabled"));
}

TEST(ContainerSpec, WorkdirAndTty) {
  TaskSpec s = cpu_job();
  s.workdir = "/workspace/src/app";
  s.tty = true;
  auto b = build_create_body(s, {"n", "/h/ws", "runsc", "yonder-egress"});
  EXPECT_EQ(b["WorkingDir"], "/workspace/src/app");
  EXPECT_EQ(b["Tty"], true);
  EXPECT_EQ(b["OpenStdin"], false);  // a terminal for output; nothing reads our stdin
}

TEST(GpuSupport, NamesTheMissingPiece) {
  EngineVersion docker{"20.10", "1.41", false};
  EngineInfo plain{{"runc"}, "runc", 1};
  auto none = gpu_support(docker, plain, false, "/var/run/docker.sock");
  EXPECT_FALSE(none.capable);
  EXPECT_NE(none.detail.find("no NVIDIA runtime"), std::string::npos);
  EXPECT_NE(none.detail.find("nvidia-ctk runtime configure"), std::string::npos);
  EXPECT_TRUE(gpu_support(docker, {{"runc", "nvidia"}, "runc", 2}, false, "s").capable);
  EXPECT_TRUE(gpu_support(docker, plain, true, "s").capable);
  auto podman = gpu_support({"4.3", "1.41", true}, {{"runc", "nvidia"}, "runc", 2}, true, "/run/podman/podman.sock");
  EXPECT_FALSE(podman.capable);
  EXPECT_NE(podman.detail.find("Podman"), std::string::npos);
  EXPECT_NE(podman.detail.find("silently ignores"), std::string::npos);
}

// Podman mounts writable /run and /var/tmp of its own (read_only_tmpfs),
// unbounded; the spec gives them the bound of /tmp. Docker gets neither.
TEST(ContainerSpec, PodmanGetsRunAndVarTmpBoundedLikeTmp) {
  CreateContext ctx{"node-1", "", "runsc", "yonder-egress", true};
  auto tmpfs = build_create_body(cpu_job(), ctx)["HostConfig"]["Tmpfs"];
  EXPECT_EQ(tmpfs["/run"], tmpfs["/tmp"]);
  EXPECT_EQ(tmpfs["/var/tmp"], tmpfs["/tmp"]);
  EXPECT_NE(tmpfs["/run"].get<std::string>().find("size=134217728"), std::string::npos) << tmpfs;
  ctx.podman = false;
  auto docker = build_create_body(cpu_job(), ctx)["HostConfig"]["Tmpfs"];
  EXPECT_EQ(docker.size(), 1u) << docker;
}

TEST(IsolationSupport, GvisorIsRefusedOnPodmanEvenWhenItListsRunsc) {
  Fingerprint podman;
  podman.healthy = true;
  podman.engine = "podman";
  podman.version = "4.3.1";
  podman.runtimes = {"crun", "runc", "runsc", "kata"};  // its configuration, installed or not
  auto st = isolation_support(podman, Isolation::kGvisor, "runsc", "/run/podman/podman.sock");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message().find("Podman 4.3.1"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("host kernel"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("standard isolation"), std::string::npos) << "what to do next";
  EXPECT_TRUE(isolation_support(podman, Isolation::kStandard, "runsc", "s").ok());

  Fingerprint docker = podman;
  docker.engine = "docker";
  EXPECT_TRUE(isolation_support(docker, Isolation::kGvisor, "runsc", "s").ok());
  docker.runtimes = {"runc"};
  auto missing = isolation_support(docker, Isolation::kGvisor, "runsc", "s");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("apt-get install runsc"), std::string::npos);
}

TEST(IsolationSupport, ACreatedContainerMustHaveTheRuntimeAskedFor) {
  EXPECT_TRUE(runtime_enforced(Isolation::kGvisor, "runsc", "runsc", "s").ok());
  EXPECT_TRUE(runtime_enforced(Isolation::kStandard, "runsc", "oci", "s").ok());
  auto dropped = runtime_enforced(Isolation::kGvisor, "runsc", "oci", "/run/podman/podman.sock");  // Podman 4.3's answer
  ASSERT_FALSE(dropped.ok());
  EXPECT_NE(dropped.error().message().find("'oci' instead of 'runsc'"), std::string::npos) << dropped.error().message();
}

}  // namespace
}  // namespace yonder::exec::docker
