#include "mesh/jobs/mesh_job_store.h"

#include "base/clock.h"
#include "base/id_prefix.h"

#include <chrono>

namespace yonder::mesh {
namespace {

nlohmann::json parse_or_null(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

}  // namespace

nlohmann::json MeshAttempt::to_json() const {
  nlohmann::json j = {{"attempt", attempt},
                      {"replica", replica},
                      {"provider_id", provider_id},
                      {"provider_name", provider_name},
                      {"job_id", job_id},
                      {"state", state},
                      {"why", why},
                      {"started_at", started_at}};
  j["exit_code"] = exit_code ? nlohmann::json(*exit_code) : nlohmann::json();
  j["ended_at"] = ended_at ? nlohmann::json(*ended_at) : nlohmann::json();
  return j;
}

nlohmann::json MeshJobRow::to_json() const {
  nlohmann::json attempts_json = nlohmann::json::array();
  for (const auto& a : attempts) attempts_json.push_back(a.to_json());
  return {{"mesh_job_id", id},        {"state", state},           {"spec", spec},
          {"result", result},         {"created_at", created_at}, {"updated_at", updated_at},
          {"attempts", attempts_json}};
}

Result<std::unique_ptr<MeshJobStore>> MeshJobStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("mesh jobs");
  return std::unique_ptr<MeshJobStore>(new MeshJobStore(std::move(*db)));
}

Status MeshJobStore::put(const MeshJobRow& job) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "INSERT INTO mesh_jobs (mesh_job_id, state, spec_json, result_json, created_at, updated_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(mesh_job_id) DO UPDATE SET state = ?2, spec_json = ?3, "
      "result_json = ?4, updated_at = ?6");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, job.id));
  YONDER_TRY(st->bind(2, job.state));
  YONDER_TRY(st->bind(3, job.spec.dump()));
  if (job.result.is_null()) {
    YONDER_TRY(st->bind(4, nullptr));
  } else {
    YONDER_TRY(st->bind(4, job.result.dump()));
  }
  YONDER_TRY(st->bind(5, job.created_at));
  YONDER_TRY(st->bind(6, unix_now_s()));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing mesh job " + job.id);
  return ok_status();
}

Status MeshJobStore::put_attempt(const std::string& id, const MeshAttempt& a) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "INSERT INTO mesh_job_attempts (mesh_job_id, attempt, replica, provider_id, provider_name, job_id, state, why, "
      "exit_code, started_at, ended_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
      "ON CONFLICT(mesh_job_id, attempt) DO UPDATE SET job_id = ?6, state = ?7, why = ?8, exit_code = ?9, "
      "ended_at = ?11");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, id));
  YONDER_TRY(st->bind(2, a.attempt));
  YONDER_TRY(st->bind(3, a.replica));
  YONDER_TRY(st->bind(4, a.provider_id));
  YONDER_TRY(st->bind(5, a.provider_name));
  YONDER_TRY(st->bind(6, a.job_id));
  YONDER_TRY(st->bind(7, a.state));
  YONDER_TRY(st->bind(8, a.why));
  YONDER_TRY(st->bind(9, a.exit_code));
  YONDER_TRY(st->bind(10, a.started_at));
  YONDER_TRY(st->bind(11, a.ended_at));
  auto done = st->step();
  if (!done)
    return std::move(done).error().with_context("storing attempt " + std::to_string(a.attempt) + " of mesh job " + id);
  return ok_status();
}

Result<std::vector<MeshAttempt>> MeshJobStore::attempts_of(const std::string& id) {
  auto st = db_.prepare(
      "SELECT attempt, replica, provider_id, provider_name, job_id, state, why, exit_code, started_at, ended_at "
      "FROM mesh_job_attempts WHERE mesh_job_id = ?1 ORDER BY attempt");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, id));
  std::vector<MeshAttempt> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    MeshAttempt a;
    a.attempt = static_cast<int>(st->column_int64(0));
    a.replica = static_cast<int>(st->column_int64(1));
    a.provider_id = st->column_text(2);
    a.provider_name = st->column_text(3);
    a.job_id = st->column_optional_text(4).value_or("");
    a.state = st->column_text(5);
    a.why = st->column_optional_text(6).value_or("");
    if (auto c = st->column_optional_int64(7)) a.exit_code = static_cast<int>(*c);
    a.started_at = st->column_int64(8);
    a.ended_at = st->column_optional_int64(9);
    out.push_back(std::move(a));
  }
  return out;
}

Result<MeshJobRow> MeshJobStore::find(const std::string& id_or_prefix) {
  static constexpr IdNoun kWhat{"a mesh job", "mesh job", "`yonder mesh jobs` lists them"};
  YONDER_TRY(check_id_arg(id_or_prefix, kWhat));
  auto all = list();
  if (!all) return std::move(all).error();
  return find_by_id_prefix(std::move(*all), id_or_prefix, kWhat);
}

Result<std::vector<MeshJobRow>> MeshJobStore::list(bool unfinished_only) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT mesh_job_id, state, spec_json, result_json, created_at, updated_at FROM "
                                    "mesh_jobs") +
                        (unfinished_only ? " WHERE state = 'running'" : "") + " ORDER BY created_at DESC, rowid DESC");
  if (!st) return std::move(st).error();
  std::vector<MeshJobRow> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    MeshJobRow j;
    j.id = st->column_text(0);
    j.state = st->column_text(1);
    j.spec = parse_or_null(st->column_text(2));
    if (auto r = st->column_optional_text(3)) j.result = parse_or_null(*r);
    j.created_at = st->column_int64(4);
    j.updated_at = st->column_int64(5);
    out.push_back(std::move(j));
  }
  for (auto& j : out) {
    auto a = attempts_of(j.id);
    if (!a) return std::move(a).error();
    j.attempts = std::move(*a);
  }
  return out;
}

}  // namespace yonder::mesh
