// How the provider turns a consumer's job request (jobs/protocol/
// job_request.h) into an exec::TaskSpec within its own limits, and the
// terms it stores with an accepted job.
//
// resolve() applies the provider's defaults and refuses, with the setting
// named, what the provider never allows. The defaults are the jobs.*
// settings (ProviderLimits): nowhere else.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "exec/executor.h"
#include "jobs/protocol/job_request.h"
#include "jobs/provider/gpu_shares.h"

namespace yonder {
struct Scope;
}

namespace yonder::jobs::provider {

using protocol::JobRequest;

// The provider's defaults and ceilings (from config: jobs.*, executor.*).
struct ProviderLimits {
  double default_cpus = 1;
  double max_cpus = 2;
  int64_t default_memory_mib = 2048;
  int64_t max_memory_mib = 16384;
  int64_t default_disk_mib = 10240;
  int64_t max_disk_mib = 102400;
  int64_t default_wall_time_s = 3600;
  int64_t max_wall_time_s = 86400;
  int64_t pids = 512;
  int64_t shm_mib = 0;  // a job's /dev/shm by default; 0: half its memory
  int64_t log_file_bytes = 10 << 20;
  bool allow_egress = false;
  bool allow_gvisor = true;
};

struct ResolvedJob {
  exec::TaskSpec task;               // job_id and gpu_uuids filled in later
  std::chrono::seconds wall_time{0};
  int gpus = 0;
  uint64_t vram_bytes = 0;           // per GPU, 0 = no limit
  std::optional<ShareRequest> share; // a share of one GPU instead (gpus 0, vram_bytes 0)
};

// The share a request asks for, if any (its fraction capped by vram_mib).
std::optional<ShareRequest> share_request(const JobRequest& request);

// Holds the request to the caller's scope; fills unset fields from it where
// the scope is tighter than the provider's default (a fraction of a GPU
// gets the scope's VRAM cap as its own). The scope's jobs at once
// (--max-jobs) is not a refusal: past it a job waits in the queue
// (queue_core.h), so it goes to ProviderJobs::submit instead.
Status apply_scope(JobRequest& request, const Scope& scope, const ProviderLimits& limits);

// Applies defaults and checks ceilings; the error names the setting to raise.
Result<ResolvedJob> resolve(const JobRequest& request, const ProviderLimits& limits);

// What the provider keeps of an accepted job besides its state: the
// request (after the consumer's scope was applied) and what resolve()
// made of it then, so a queued job's terms do not change under it.
struct JobTerms {
  JobRequest request;
  int64_t wall_time_s = 0;     // 0 (a row from an older version): jobs.default_wall_time_s
  uint64_t vram_bytes = 0;     // per GPU, 0 = no limit
  int gpus = 0;
  uint64_t disk_bytes = 0;     // 0 (an older row): jobs.default_disk_mib
  bool simulate_gpus = false;  // gpu.simulate: fake devices were leased
  std::string workspace_seed;  // the uploaded folder the workspace starts from; "" none
  int max_running = 0;         // its peer's jobs at once under the scope it was submitted with; 0: none
};

// The terms of a job the provider accepts now.
JobTerms job_terms(const JobRequest& request, const ResolvedJob& resolved, bool simulate_gpus,
                   std::string workspace_seed);

// The job store's encoding ({"request", "wall_time_s", "vram_bytes", "gpus",
// "disk_bytes", "simulate_gpus", "workspace_seed"?, "max_running"?}) and its decoder, which
// reads the request with parse_job_request: kDataLoss names what is damaged.
nlohmann::json terms_to_json(const JobTerms& terms);
Result<JobTerms> terms_from_json(const nlohmann::json& json);

}  // namespace yonder::jobs::provider
