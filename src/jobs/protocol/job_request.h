// What a consumer asks a provider to run: one type from the CLI's parse of
// `yonder run` to the provider's job store, with one encoder (to_json) and
// one decoder (parse_job_request) wherever it crosses a process or a disk:
// CLI -> consumer daemon (local API), consumer daemon -> provider
// (run.submit), the mesh's and the provider's stores.
//
// Zero in a number means "the provider's default": the defaults live in one
// place, the provider's jobs.* settings (jobs/provider/job_terms.h).
//
// The request is untrusted: parse_job_request bounds every field, refuses
// unknown keys (a typo must not silently fall back to a default) and is
// fuzzed (fuzz/job_request_fuzz.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "exec/executor.h"  // Isolation

namespace yonder::jobs::protocol {

struct JobRequest {
  std::string image;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int gpus = 0;
  int64_t vram_mib = 0;       // per GPU: leases only devices this big, and stops the job past it; 0: no limit
  // A share of one GPU instead of whole ones (gpus is then 0), at most one
  // of the two: `--vram 8G` alone (share_vram_mib) or `--gpus 0.5`
  // (share_permille, 1 to 999: that part of the memory of the GPU it lands
  // on, but no more than vram_mib when that is set: `--gpus 0.5 --vram 12G`,
  // or the cap of the peer's scope). The provider holds the job to it
  // (jobs/provider/gpu_shares.h).
  int64_t share_vram_mib = 0;
  int32_t share_permille = 0;
  double cpus = 0;            // 0: provider default
  int64_t memory_mib = 0;     // 0: provider default
  int64_t disk_mib = 0;       // 0: provider default
  int64_t wall_time_s = 0;    // 0: provider default
  exec::Isolation isolation = exec::Isolation::kStandard;
  bool egress = false;
  // The job's working directory: relative to its workspace or an absolute
  // path under /workspace; "" is the workspace itself. Never "..", never a
  // NUL byte. The provider creates it (owned by the job's user) if missing.
  std::string workdir;
  bool tty = false;  // the job's main process gets a terminal; its output is one stream (stdout)
  // Jobs of the same peer on the same provider this one waits for (Slurm's
  // --dependency): `after`, until each has ended however; `after_ok`, until
  // each has exited 0 (one that did not means this job never starts). Full
  // provider job ids; at most kMaxDependencies in all.
  std::vector<std::string> after;
  std::vector<std::string> after_ok;
  bool hold = false;  // queued held: it starts only once released (`yonder release`)
  // The job's /dev/shm (docker's --shm-size); 0: the provider's default.
  // What a PyTorch DataLoader's workers hand their batches through.
  int64_t shm_mib = 0;

  bool share() const { return share_vram_mib > 0 || share_permille > 0; }
  nlohmann::json to_json() const;
};

// Where the workspace is mounted inside a job.
inline constexpr const char* kWorkspaceMount = "/workspace";
constexpr size_t kMaxWorkdirBytes = 1024;

// The absolute working directory inside the job for a request's `workdir`
// (already validated by parse_job_request): "/workspace" for "".
std::string job_workdir(const std::string& workdir);

constexpr size_t kMaxRequestBytes = 512 * 1024;
constexpr size_t kMaxDependencies = 16;

// Parses the request object. kInvalidArgument names the field and the rule.
Result<JobRequest> parse_job_request(const nlohmann::json& json);

}  // namespace yonder::jobs::protocol
