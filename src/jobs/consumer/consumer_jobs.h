// Jobs this node submitted to providers (jobs table, side 'consumer').
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
#include "store/database.h"

namespace yonder::jobs::consumer {

// What this node saw of a job itself, on its own clock (Unix ms; 0: not
// seen): the evidence it countersigns receipts against (mesh/core/metering.h).
// Each is set once, at the first view that shows it, and never moved: a
// provider that later rewrites its record cannot rewrite what was seen.
// Kept in spec_json under "observed".
struct ConsumerObservation {
  int64_t first_running_ms = 0;  // the first view in which the job was running
  int64_t ended_ms = 0;          // the first view in which it had ended
  std::optional<int> exit_code;  // the exit code in that first ended view

  nlohmann::json to_json() const;
  static ConsumerObservation from_json(const nlohmann::json& j);
};

struct ConsumerJob {
  std::string job_id;       // the provider's id
  std::string provider_id;  // node id of the provider
  std::string state;        // as last reported: queued, starting, running, exited, stopped, failed
  nlohmann::json spec = nlohmann::json::object();  // {"request", "provider_name", "upload", "name"?}
  nlohmann::json last = nlohmann::json::object();  // the provider's last view of the job
  std::optional<int> exit_code;
  ConsumerObservation observed;
  int64_t created_at = 0;
  int64_t updated_at = 0;

  bool finished() const { return state == "exited" || state == "stopped" || state == "failed"; }
  nlohmann::json to_json() const;
};

// A job's name (`run --name`): 1 to 64 characters, letters, digits and
// `_.-`, starting with a letter or digit (docker's rule, shorter).
// kInvalidArgument says the rule.
Status check_job_name(const std::string& name);

class ConsumerJobStore {
 public:
  static Result<std::unique_ptr<ConsumerJobStore>> open(const std::string& db_path);

  // Inserts or updates (by job id).
  Status save(const ConsumerJob& job);
  // Records a view the provider returned (state, exit code) as seen at
  // `seen_ms` (Unix ms, this node's clock), and what it shows for the first
  // time into `observed`.
  Status update_from_view(const nlohmann::json& view, int64_t seen_ms);
  // For a job that ended already: takes from the provider's view only that
  // it removed the job's workspace or log (`ps --all` marks it cleaned);
  // its state and exit code, seen while it ran, stay as they were.
  Status record_cleanup(const nlohmann::json& view);
  // By full id, by name (the newest job of that name), or by a unique
  // prefix of an id (at least 4 characters), in that order.
  Result<ConsumerJob> find(const std::string& id_or_prefix);
  // Oldest first.
  Result<std::vector<ConsumerJob>> list();

 private:
  explicit ConsumerJobStore(store::Database db) : db_(std::move(db)) {}
  Result<ConsumerJob> read_row(store::Statement& st);
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::jobs::consumer
