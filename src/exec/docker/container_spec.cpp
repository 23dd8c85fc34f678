#include "exec/docker/container_spec.h"

#include <algorithm>

namespace yonder::exec::docker {

// Under gVisor the container's cgroup also holds the sandbox kernel (the
// Sentry), whose Go runtime threads count against PidsLimit: with the job's
// own limit alone (64 by default) the job cannot even fork. Measured here:
// 64 fails at the first fork, 512 works; the job's processes are still
// limited inside the sandbox by the same cgroup.
constexpr int64_t kGvisorSentryThreads = 256;

nlohmann::json build_create_body(const TaskSpec& spec, const CreateContext& ctx) {
  using nlohmann::json;
  json env = json::array();
  const bool guarded = spec.vram_budget_bytes > 0 && !ctx.vram_dir.empty();
  for (const auto& [k, v] : spec.env) {
    if (!(guarded && k == "LD_PRELOAD")) env.push_back(k + "=" + v);
  }
  std::string visible = "void";
  if (!spec.gpu_uuids.empty()) {
    visible.clear();
    for (const auto& u : spec.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  }
  // Set last so nothing above can override them (the consumer's env was
  // already refused if it named them; this is the second lock).
  env.push_back("NVIDIA_VISIBLE_DEVICES=" + visible);
  if (!spec.gpu_uuids.empty()) env.push_back("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  if (spec.simulate_gpus) env.push_back("YONDER_FAKE_GPUS=1");
  if (guarded) {
    // The guard first, then what the job preloads itself (ld.so takes
    // spaces or colons between them).
    auto own = spec.env.find("LD_PRELOAD");
    env.push_back(std::string("LD_PRELOAD=") + kVramGuardPath + (own != spec.env.end() ? " " + own->second : ""));
    env.push_back(std::string("YONDER_VRAM_LEDGER=") + kVramLedgerDir + "/" + kVramLedgerFile);
  }

  const Limits& l = spec.limits;
  // Every writable tmpfs the job gets has the same bound (its pages count
  // against Memory too).
  const std::string bounded_tmpfs = "rw,nosuid,nodev,size=" + std::to_string(l.tmp_bytes) + ",mode=1777";
  json host = {
      {"CapDrop", json::array({"ALL"})},
      {"CapAdd", json::array()},
      {"SecurityOpt", json::array({"no-new-privileges"})},
      {"Privileged", false},
      {"ReadonlyRootfs", true},
      {"PidsLimit", spec.isolation == Isolation::kGvisor ? l.pids + kGvisorSentryThreads : l.pids},
      {"Memory", l.memory_bytes},
      {"MemorySwap", l.memory_bytes},
      {"NanoCpus", l.nano_cpus},
      {"ShmSize", l.shm_bytes},
      {"IpcMode", "private"},
      {"OomScoreAdj", 500},  // under host memory pressure, jobs go first
      {"Init", true},        // reaps zombies and forwards signals to the job
      {"NetworkMode", spec.network_egress ? ctx.egress_network : std::string("none")},
      {"RestartPolicy", {{"Name", "no"}}},
      {"AutoRemove", false},  // we read the exit status and logs first
      {"LogConfig",
       {{"Type", "json-file"}, {"Config", {{"max-size", std::to_string(l.log_file_bytes)}, {"max-file", "2"}}}}},
      {"Tmpfs", {{"/tmp", bounded_tmpfs}}},
  };
  if (ctx.podman) {
    // Podman would mount these itself, unbounded (read_only_tmpfs); given
    // here, its own are skipped.
    host["Tmpfs"]["/run"] = bounded_tmpfs;
    host["Tmpfs"]["/var/tmp"] = bounded_tmpfs;
  }
  json mounts = json::array();
  if (!ctx.workspace.empty()) {
    mounts.push_back({{"Type", "bind"}, {"Source", ctx.workspace}, {"Target", "/workspace"}, {"ReadOnly", false}});
  }
  if (guarded) {
    mounts.push_back({{"Type", "bind"}, {"Source", ctx.vram_dir}, {"Target", kVramLedgerDir}, {"ReadOnly", false}});
    mounts.push_back({{"Type", "bind"}, {"Source", ctx.vram_guard}, {"Target", kVramGuardPath}, {"ReadOnly", true}});
  }
  if (!mounts.empty()) host["Mounts"] = mounts;
  if (spec.isolation == Isolation::kGvisor) host["Runtime"] = ctx.gvisor_runtime;
  if (!spec.gpu_uuids.empty() && !spec.simulate_gpus) {
    host["DeviceRequests"] = json::array({{{"Driver", "nvidia"},
                                           {"DeviceIDs", spec.gpu_uuids},
                                           {"Capabilities", json::array({json::array({"gpu"})})}}});
  }
  json body = {
      {"Image", spec.image},
      {"User", "65534:65534"},
      {"WorkingDir", spec.workdir},
      {"Env", env},
      {"Hostname", "job"},
      {"Tty", spec.tty},
      {"OpenStdin", false},
      {"AttachStdin", false},
      {"AttachStdout", false},
      {"AttachStderr", false},
      {"StopSignal", "SIGTERM"},
      {"Labels", {{kOwnerLabel, ctx.owner}, {kJobLabel, spec.job_id}}},
      {"HostConfig", host},
  };
  if (!spec.command.empty()) body["Cmd"] = spec.command;
  if (!spec.network_egress) body["NetworkDisabled"] = true;
  return body;
}

GpuSupport gpu_support(const EngineVersion& version, const EngineInfo& info, bool hook_installed,
                       const std::string& socket) {
  if (version.podman) {
    return {false, "the engine at " + socket +
                       " is Podman, whose Docker-compatible API silently ignores GPU requests; a GPU job would run "
                       "without its GPU, so GPU jobs are refused (use Docker with the NVIDIA container toolkit)"};
  }
  bool nvidia_runtime = std::find(info.runtimes.begin(), info.runtimes.end(), "nvidia") != info.runtimes.end();
  if (nvidia_runtime || hook_installed) return {true, ""};
  return {false, "the Docker engine at " + socket +
                     " has no NVIDIA runtime (no \"nvidia\" runtime in `docker info` and no "
                     "nvidia-container-runtime-hook on PATH); install the NVIDIA container toolkit "
                     "(nvidia-container-toolkit), run `nvidia-ctk runtime configure --runtime=docker` and restart dockerd"};
}

Status isolation_support(const Fingerprint& engine, Isolation isolation, const std::string& gvisor_runtime,
                         const std::string& socket) {
  if (isolation != Isolation::kGvisor) return ok_status();
  if (engine.engine == "podman") {
    return make_error(ErrorCode::kFailedPrecondition,
                      "this job asks for gVisor isolation but the engine at " + socket + " is Podman " + engine.version +
                          ", whose Docker-compatible API ignores the runtime a container asks for: the job would run "
                          "on the host kernel, so it is refused; run it with standard isolation, or point "
                          "docker.socket at a Docker engine with runsc registered");
  }
  if (std::find(engine.runtimes.begin(), engine.runtimes.end(), gvisor_runtime) == engine.runtimes.end()) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "this job asks for gVisor isolation but the Docker engine has no '" + gvisor_runtime +
                          "' runtime; install runsc (apt-get install runsc), register it in /etc/docker/daemon.json "
                          "(\"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\"}}) and restart dockerd");
  }
  return ok_status();
}

Status runtime_enforced(Isolation isolation, const std::string& gvisor_runtime, const std::string& reported,
                        const std::string& socket) {
  if (isolation != Isolation::kGvisor || reported == gvisor_runtime) return ok_status();
  return make_error(ErrorCode::kFailedPrecondition,
                    "this job asks for gVisor isolation but the engine at " + socket + " created its container with "
                        "the runtime '" + reported + "' instead of '" + gvisor_runtime +
                        "' (it dropped the request), so the job was not started; run it with standard isolation, or "
                        "use a Docker engine with runsc registered");
}

}  // namespace yonder::exec::docker
