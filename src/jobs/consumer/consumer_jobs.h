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

struct ConsumerJob {
  std::string job_id;       // the provider's id
  std::string provider_id;  // node id of the provider
  std::string state;        // as last reported: queued, starting, running, exited, stopped, failed
  nlohmann::json spec = nlohmann::json::object();  // {"request", "provider_name", "upload"}
  nlohmann::json last = nlohmann::json::object();  // the provider's last view of the job
  std::optional<int> exit_code;
  int64_t created_at = 0;
  int64_t updated_at = 0;

  bool finished() const { return state == "exited" || state == "stopped" || state == "failed"; }
  nlohmann::json to_json() const;
};

class ConsumerJobStore {
 public:
  static Result<std::unique_ptr<ConsumerJobStore>> open(const std::string& db_path);

  // Inserts or updates (by job id).
  Status save(const ConsumerJob& job);
  // Records a view the provider returned (state, exit code).
  Status update_from_view(const nlohmann::json& view);
  // By full id or a unique prefix (at least 4 characters).
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
