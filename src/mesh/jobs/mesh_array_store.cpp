#include "mesh/jobs/mesh_array_store.h"

#include "base/clock.h"
#include "base/id_prefix.h"

#include <chrono>
#include <optional>

namespace yonder::mesh {
namespace {

nlohmann::json mesh_array_parse_or_null(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

}  // namespace

Result<std::unique_ptr<MeshArrayStore>> MeshArrayStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("array jobs");
  return std::unique_ptr<MeshArrayStore>(new MeshArrayStore(std::move(*db)));
}

Status MeshArrayStore::put(const MeshArrayRow& row) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "INSERT INTO mesh_arrays (array_id, state, spec_json, run_json, tasks_json, created_at, updated_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(array_id) DO UPDATE SET state = ?2, run_json = ?4, "
      "tasks_json = ?5, updated_at = ?7");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, row.id));
  YONDER_TRY(st->bind(2, row.state));
  YONDER_TRY(st->bind(3, row.spec.dump()));
  YONDER_TRY(st->bind(4, row.run.dump()));
  YONDER_TRY(st->bind(5, row.tasks.dump()));
  YONDER_TRY(st->bind(6, row.created_at));
  YONDER_TRY(st->bind(7, unix_now_s()));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing array " + row.id);
  return ok_status();
}

Result<MeshArrayRow> MeshArrayStore::find(const std::string& id_or_prefix) {
  static constexpr IdNoun kWhat{"an array", "array", "`yonder array list` shows them"};
  YONDER_TRY(check_id_arg(id_or_prefix, kWhat));
  auto all = list();
  if (!all) return std::move(all).error();
  return find_by_id_prefix(std::move(*all), id_or_prefix, kWhat);
}

Result<std::vector<MeshArrayRow>> MeshArrayStore::list(bool unfinished_only) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT array_id, state, spec_json, run_json, tasks_json, created_at, updated_at "
                                    "FROM mesh_arrays ") +
                        (unfinished_only ? "WHERE state = 'running' " : "") + "ORDER BY created_at DESC, rowid DESC");
  if (!st) return std::move(st).error();
  std::vector<MeshArrayRow> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    MeshArrayRow r;
    r.id = st->column_text(0);
    r.state = st->column_text(1);
    r.spec = mesh_array_parse_or_null(st->column_text(2));
    r.run = mesh_array_parse_or_null(st->column_text(3));
    r.tasks = mesh_array_parse_or_null(st->column_text(4));
    r.created_at = st->column_int64(5);
    r.updated_at = st->column_int64(6);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace yonder::mesh
