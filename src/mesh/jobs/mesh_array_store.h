// Array jobs in SQLite (the v9 table `mesh_arrays`): what the consumer asked
// for, the array's task states (mesh::ArrayRun as JSON) and which mesh job
// runs which task attempt. mesh/jobs/mesh_arrays.cpp writes an array here before
// its id is handed back, and again as tasks finish (coalesced: at most one
// write in flight per array, the newest state wins), so a restarted daemon
// resumes the array without rerunning the tasks whose outputs are home.
//
// Threading: one connection, guarded inside; blocking (disk). Called from
// the pool.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "store/database.h"

namespace yonder::mesh {

struct MeshArrayRow {
  std::string id;        // 32 hex
  std::string state;     // running, done, failed, cancelled
  nlohmann::json spec;   // {"job", "dir", "out", "needs", "params"?, "tasks", "limit", "retries"}
  nlohmann::json run;    // mesh::ArrayRun::to_json()
  nlohmann::json tasks;  // {"<attempt>": {"task", "mesh_job_id"}} for attempts still running
  int64_t created_at = 0;
  int64_t updated_at = 0;

  bool finished() const { return state != "running"; }
};

class MeshArrayStore {
 public:
  static Result<std::unique_ptr<MeshArrayStore>> open(const std::string& db_path);
  Status put(const MeshArrayRow& row);
  // By id or unique id prefix.
  Result<MeshArrayRow> find(const std::string& id_or_prefix);
  // Newest first; `unfinished_only`: running ones.
  Result<std::vector<MeshArrayRow>> list(bool unfinished_only = false);

 private:
  explicit MeshArrayStore(store::Database db) : db_(std::move(db)) {}
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::mesh
