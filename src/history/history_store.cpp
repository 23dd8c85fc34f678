#include "history/history_store.h"

#include <cmath>

namespace yonder::history {

namespace {
int64_t to_ms(double at_s) { return static_cast<int64_t>(std::llround(at_s * 1000.0)); }
double to_s(int64_t at_ms) { return static_cast<double>(at_ms) / 1000.0; }
}  // namespace

Result<std::unique_ptr<HistoryStore>> HistoryStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error();
  // A sample lost to a crash is a gap in a chart, not lost state: this
  // connection's commits need not wait for the disk.
  YONDER_TRY(db->exec("PRAGMA synchronous=NORMAL"));
  return std::unique_ptr<HistoryStore>(new HistoryStore(std::move(*db)));
}

Status HistoryStore::record(double at_s, std::span<const Sample> samples) {
  if (samples.empty()) return ok_status();
  return db_.transaction([&]() -> Status {
    auto insert = db_.prepare("INSERT INTO history_samples (series, at_ms, value) VALUES (?1, ?2, ?3)");
    if (!insert) return std::move(insert).error();
    for (const auto& s : samples) {
      if (!std::isfinite(s.value)) continue;
      YONDER_TRY(insert->bind(1, std::string_view(s.series)));
      YONDER_TRY(insert->bind(2, to_ms(at_s)));
      YONDER_TRY(insert->bind(3, s.value));
      auto stepped = insert->step();
      if (!stepped) return std::move(stepped).error();
      insert->reset();
    }
    return ok_status();
  });
}

Result<int64_t> HistoryStore::prune(double before_s, int64_t max_rows) {
  int64_t removed = 0;
  auto count = [&]() -> Result<int64_t> {
    auto changes = db_.prepare("SELECT changes()");
    if (!changes) return std::move(changes).error();
    auto row = changes->step();
    if (!row) return std::move(row).error();
    return changes->column_int64(0);
  };
  auto old = db_.prepare("DELETE FROM history_samples WHERE at_ms < ?1");
  if (!old) return std::move(old).error();
  YONDER_TRY(old->bind(1, to_ms(before_s)));
  if (auto st = old->step(); !st) return std::move(st).error();
  auto n = count();
  if (!n) return n;
  removed += *n;
  // Past the cap, the oldest go (whatever their series).
  auto over = db_.prepare(
      "DELETE FROM history_samples WHERE rowid IN (SELECT rowid FROM history_samples ORDER BY at_ms DESC "
      "LIMIT -1 OFFSET ?1)");
  if (!over) return std::move(over).error();
  YONDER_TRY(over->bind(1, max_rows));
  if (auto st = over->step(); !st) return std::move(st).error();
  n = count();
  if (!n) return n;
  return removed + *n;
}

Result<std::vector<HistoryStore::Latest>> HistoryStore::latest() {
  // SQLite's bare-column rule: with max(), the other columns come from that row.
  auto q = db_.prepare("SELECT series, max(at_ms), value FROM history_samples GROUP BY series ORDER BY series");
  if (!q) return std::move(q).error();
  std::vector<Latest> out;
  for (;;) {
    auto row = q->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    out.push_back({q->column_text(0), {to_s(q->column_int64(1)), q->column_double(2)}});
  }
  return out;
}

Result<std::vector<Point>> HistoryStore::points(const std::string& series, double since_s, int64_t limit) {
  auto q = db_.prepare(
      "SELECT at_ms, value FROM (SELECT at_ms, value FROM history_samples WHERE series = ?1 AND at_ms >= ?2 "
      "ORDER BY at_ms DESC LIMIT ?3) ORDER BY at_ms");
  if (!q) return std::move(q).error();
  YONDER_TRY(q->bind(1, std::string_view(series)));
  YONDER_TRY(q->bind(2, to_ms(since_s)));
  YONDER_TRY(q->bind(3, limit));
  std::vector<Point> out;
  for (;;) {
    auto row = q->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    out.push_back({to_s(q->column_int64(0)), q->column_double(1)});
  }
  return out;
}

}  // namespace yonder::history
