// What a consumer asks the provider to run, as it arrives (JSON from the
// local API today, from a peer over the link later), and how the provider
// turns it into an exec::TaskSpec within its own limits.
//
// The request is untrusted: parse_job_request bounds every field, refuses
// unknown keys (a typo must not silently fall back to a default) and is
// fuzzed (fuzz/job_request_fuzz.cpp). resolve() applies the provider's
// defaults and refuses, with the limit named, what the provider never allows.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "exec/executor.h"

namespace yonder::jobs::provider {

struct JobRequest {
  std::string image;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int gpus = 0;
  int64_t vram_mib = 0;       // per GPU: leases only devices this big, and stops the job past it; 0: no limit
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

  nlohmann::json to_json() const;
};

// Where the workspace is mounted inside a job.
inline constexpr const char* kWorkspaceMount = "/workspace";
constexpr size_t kMaxWorkdirBytes = 1024;

// The absolute working directory inside the job for a request's `workdir`
// (already validated by parse_job_request): "/workspace" for "".
std::string job_workdir(const std::string& workdir);

constexpr size_t kMaxRequestBytes = 512 * 1024;

// Parses the request object. kInvalidArgument names the field and the rule.
Result<JobRequest> parse_job_request(const nlohmann::json& json);

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
  int64_t shm_mib = 64;
  int64_t log_file_bytes = 10 << 20;
  bool allow_egress = false;
  bool allow_gvisor = true;
};

struct ResolvedJob {
  exec::TaskSpec task;               // job_id and gpu_uuids filled in later
  std::chrono::seconds wall_time{0};
  int gpus = 0;
  uint64_t vram_bytes = 0;           // per GPU, 0 = no limit
};

// Applies defaults and checks ceilings; the error names the setting to raise.
Result<ResolvedJob> resolve(const JobRequest& request, const ProviderLimits& limits);

}  // namespace yonder::jobs::provider
