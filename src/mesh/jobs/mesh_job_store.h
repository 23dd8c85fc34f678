// Mesh jobs in SQLite (the v7 tables `mesh_jobs` and `mesh_job_attempts`):
// what the consumer asked for, where the job stands, and every attempt on
// a provider. mesh/jobs/mesh_jobs.cpp writes a job here before it hands its id
// back, and an attempt before it acts on it, so a restarted daemon knows
// which jobs to pick up again and which provider job ids to look for.
//
// Threading: one connection, guarded inside; blocking (disk). Called from
// the pool.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "store/database.h"

namespace yonder::mesh {

struct MeshAttempt {
  int attempt = 0;  // 1, 2, ... within its job
  int replica = 0;  // 0 .. replicas-1
  std::string provider_id;
  std::string provider_name;
  std::string job_id;  // the provider's job id; "" until submitted
  // placing, uploading, running, exited, failed, stopped, lost, not started
  std::string state;
  std::string why;  // how it ended, in words ("" while it runs)
  std::optional<int> exit_code;
  int64_t started_at = 0;  // unix seconds
  std::optional<int64_t> ended_at;

  bool ended() const { return state != "uploading" && state != "running"; }
  nlohmann::json to_json() const;
};

struct MeshJobRow {
  std::string id;  // 32 hex
  // running, succeeded, failed, stopped
  std::string state;
  nlohmann::json spec;    // {"job", "dir", "needs", "retries", "replicas", "validator"}
  nlohmann::json result;  // null while it runs; {"exit_code", "attempt", "message", ...} at the end
  int64_t created_at = 0;
  int64_t updated_at = 0;
  std::vector<MeshAttempt> attempts;  // by attempt number

  bool finished() const { return state != "running"; }
  nlohmann::json to_json() const;
};

class MeshJobStore {
 public:
  static Result<std::unique_ptr<MeshJobStore>> open(const std::string& db_path);

  // Inserts or updates the job's row (not its attempts).
  Status put(const MeshJobRow& job);
  // Inserts or updates one attempt of job `id`.
  Status put_attempt(const std::string& id, const MeshAttempt& a);
  // A job by id or unique id prefix, with its attempts.
  Result<MeshJobRow> find(const std::string& id_or_prefix);
  // Every job (newest first), with its attempts; `unfinished_only`: running ones.
  Result<std::vector<MeshJobRow>> list(bool unfinished_only = false);

 private:
  explicit MeshJobStore(store::Database db) : db_(std::move(db)) {}
  Result<std::vector<MeshAttempt>> attempts_of(const std::string& id);
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::mesh
