// The node's stored measurements (history_core.h's series), in its SQLite
// database (table history_samples, schema v13): one row per series and
// sample, pruned by age and by a row cap, so it stays bounded whatever runs.
//
// Threading: as store::Database, one thread at a time and never the event
// loop (HistoryService holds a mutex around it on the worker pool).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "history/history_core.h"
#include "store/database.h"

namespace yonder::history {

class HistoryStore {
 public:
  // Opens the node's database (migrated by the daemon before this).
  static Result<std::unique_ptr<HistoryStore>> open(const std::string& db_path);

  // One sample's values, all at `at_s`, in one transaction.
  Status record(double at_s, std::span<const Sample> samples);
  // Removes samples older than `before_s`, then the oldest past `max_rows`.
  // Returns how many rows went.
  Result<int64_t> prune(double before_s, int64_t max_rows);

  struct Latest {
    std::string series;
    Point last;
  };
  // Every stored series with its newest point, by name.
  Result<std::vector<Latest>> latest();
  // A series' points from `since_s` on, oldest first (at most `limit`, the newest).
  Result<std::vector<Point>> points(const std::string& series, double since_s, int64_t limit);

 private:
  explicit HistoryStore(store::Database db) : db_(std::move(db)) {}
  store::Database db_;
};

}  // namespace yonder::history
