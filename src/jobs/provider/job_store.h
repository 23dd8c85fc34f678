// The provider's jobs in SQLite (the v2 `jobs` table, side 'provider', plus
// v4's result_json and job_gpu_leases). A job is written here before it is
// acknowledged, and its task handle as soon as the executor returns one, so
// a daemon killed at any point finds every job again.
//
// Threading: one connection, guarded inside; blocking (disk): worker threads only.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/strong_id.h"
#include "exec/executor.h"
#include "jobs/provider/job_terms.h"
#include "store/database.h"

namespace yonder::jobs::provider {

// queued -> starting -> running -> exited | stopped | failed
// (queued -> stopped when stopped before it started; starting -> failed when
// the executor refused it).
enum class JobState { kPending, kStarting, kRunning, kExited, kStopped, kFailed };
const char* job_state_name(JobState s);
std::optional<JobState> job_state_from_name(std::string_view name);
inline bool is_terminal(JobState s) { return s == JobState::kExited || s == JobState::kStopped || s == JobState::kFailed; }

struct JobRecord {
  std::string job_id;
  std::string peer_id;
  JobState state = JobState::kPending;
  JobTerms terms;         // the request and what the provider made of it when it accepted the job
  std::optional<exec::TaskHandle> handle;
  std::optional<int> exit_code;
  nlohmann::json result = nlohmann::json::object();  // reason, message, oom_killed, started_at, finished_at
  std::vector<std::string> gpu_uuids;  // leased while starting/running
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

class JobStore {
 public:
  explicit JobStore(store::Database db) : db_(std::move(db)) {}

  // Inserts or updates the job and replaces its GPU leases, in one
  // transaction. A lease already held by another job is kAlreadyExists.
  Status save(const JobRecord& job);
  Result<std::optional<JobRecord>> get(const JobId& job_id);
  // Every provider job, oldest first.
  Result<std::vector<JobRecord>> list();
  Status remove(const JobId& job_id);

 private:
  Result<JobRecord> read_row(store::Statement& st);
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::jobs::provider
