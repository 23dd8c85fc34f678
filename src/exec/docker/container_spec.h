// The hardened container a job runs in, as the body of Docker's
// POST /containers/create, and the engine capability checks made before
// creating one. Pure functions: unit-tested field by field
// (tests/exec/docker/container_spec_test.cpp) and then by the abuse suite
// against a real dockerd.
//
// Defaults, all on, always (measured in ../shared/ARCHITECTURE.md):
// CapDrop ALL, no-new-privileges, read-only root, User 65534:65534,
// PidsLimit, Memory = MemorySwap, NanoCpus, ShmSize, NetworkMode none (or the
// dedicated egress network when the scope allows egress), json-file logs
// capped by size and count, a size-limited tmpfs /tmp, the workspace bind
// mount, a private IPC namespace, an init process, and
// NVIDIA_VISIBLE_DEVICES set by us ("void" for CPU jobs, so an engine whose
// default runtime is nvidia exposes no GPU). A share of a GPU also gets the
// VRAM guard preloaded with its ledger (CreateContext::vram_dir).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "exec/docker/docker_json.h"
#include "exec/executor.h"

namespace yonder::exec::docker {

inline constexpr const char* kOwnerLabel = "yonder.owner";
inline constexpr const char* kJobLabel = "yonder.job";

struct CreateContext {
  std::string owner;            // value of the owner label (the node's id)
  std::string workspace;        // host path bind-mounted at /workspace, "" for none
  std::string gvisor_runtime;   // runtime name for Isolation::kGvisor ("runsc")
  std::string egress_network;   // network for jobs allowed egress
  // The engine is Podman: its read_only_tmpfs adds writable, unbounded
  // tmpfs mounts at /run and /var/tmp to a read-only container, so they
  // are given explicitly, bounded like /tmp.
  bool podman = false;
  // A share of a GPU (TaskSpec::vram_budget_bytes): the host folder holding
  // the job's VRAM ledger, mounted read-write at kVramLedgerDir, and the
  // VRAM guard library, mounted read-only at kVramGuardPath and preloaded
  // (LD_PRELOAD, ahead of any the job sets). Empty for other jobs.
  std::string vram_dir{};
  std::string vram_guard{};
};

inline constexpr const char* kVramLedgerDir = "/run/yonder-vram";
inline constexpr const char* kVramLedgerFile = "ledger";
inline constexpr const char* kVramGuardPath = "/usr/lib/yonder/libyonder-vram-guard.so";

nlohmann::json build_create_body(const TaskSpec& spec, const CreateContext& ctx);

struct GpuSupport {
  bool capable = false;
  std::string detail;  // the missing piece and how to add it
};

// Whether GPU jobs can run on this engine. `hook_installed`: the NVIDIA
// container runtime hook is on this host's PATH (what Docker's DeviceRequests
// for driver "nvidia" need even without a registered "nvidia" runtime).
GpuSupport gpu_support(const EngineVersion& version, const EngineInfo& info, bool hook_installed,
                       const std::string& socket);

// Whether the engine can give a job the isolation it asks for (no side
// effects; check() and start() call it). gVisor needs the runtime to be
// registered, and is refused on Podman: its Docker-compatible API (4.3)
// ignores HostConfig.Runtime and lists every runtime of its configuration,
// installed or not, so the job would run on the host kernel.
Status isolation_support(const Fingerprint& engine, Isolation isolation, const std::string& gvisor_runtime,
                         const std::string& socket);

// After create, before start: the runtime the engine reports for the new
// container must be the one asked for (a second lock for engines that
// accept a runtime and drop it, as Podman does).
Status runtime_enforced(Isolation isolation, const std::string& gvisor_runtime, const std::string& reported,
                        const std::string& socket);

}  // namespace yonder::exec::docker
