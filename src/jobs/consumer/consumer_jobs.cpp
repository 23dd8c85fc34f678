#include "jobs/consumer/consumer_jobs.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>

#include "base/clock.h"

namespace yonder::jobs::consumer {
namespace {

constexpr const char* kColumns = "job_id, peer_id, state, spec_json, exit_code, result_json, created_at, updated_at";

}  // namespace

nlohmann::json ConsumerObservation::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (first_running_ms > 0) j["first_running_ms"] = first_running_ms;
  if (ended_ms > 0) j["ended_ms"] = ended_ms;
  if (exit_code) j["exit_code"] = *exit_code;
  return j;
}

ConsumerObservation ConsumerObservation::from_json(const nlohmann::json& j) {
  ConsumerObservation o;
  if (!j.is_object()) return o;
  auto ms = [&](const char* key) {
    return j.contains(key) && j[key].is_number_integer() ? std::max<int64_t>(0, j[key].get<int64_t>()) : 0;
  };
  o.first_running_ms = ms("first_running_ms");
  o.ended_ms = ms("ended_ms");
  if (j.contains("exit_code") && j["exit_code"].is_number_integer()) o.exit_code = j["exit_code"].get<int>();
  return o;
}

nlohmann::json ConsumerJob::to_json() const {
  nlohmann::json v = last.is_object() ? last : nlohmann::json::object();
  v["job_id"] = job_id;
  v["provider"] = provider_id;
  v["provider_name"] = spec.value("provider_name", "");
  v["state"] = state;
  v["exit_code"] = exit_code ? nlohmann::json(*exit_code) : nlohmann::json(nullptr);
  v["submitted_at"] = created_at;
  if (spec.contains("name") && spec["name"].is_string()) v["name"] = spec["name"];
  v.erase("peer_id");  // that is us
  if (!v.contains("image")) v["image"] = spec.value("request", nlohmann::json::object()).value("image", "");
  if (!v.contains("command")) v["command"] = spec.value("request", nlohmann::json::object()).value("command", nlohmann::json::array());
  return v;
}

Status check_job_name(const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  bool ok = !name.empty() && name.size() <= 64 && word(name.front()) &&
            std::all_of(name.begin(), name.end(), [&](char c) { return word(c) || c == '_' || c == '.' || c == '-'; });
  if (ok) return ok_status();
  return make_error(ErrorCode::kInvalidArgument,
                    "--name \"" + name.substr(0, 64) +
                        "\" is not a job name: 1 to 64 letters, digits and _.-, starting with a letter or digit");
}

Result<std::unique_ptr<ConsumerJobStore>> ConsumerJobStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("consumer jobs");
  return std::unique_ptr<ConsumerJobStore>(new ConsumerJobStore(std::move(*db)));
}

Status ConsumerJobStore::save(const ConsumerJob& job) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("INSERT INTO jobs (") + kColumns + ", side) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'consumer') "
                        "ON CONFLICT(job_id) DO UPDATE SET state = ?3, spec_json = ?4, exit_code = ?5, result_json = ?6, "
                        "updated_at = ?8 WHERE side = 'consumer'");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, job.job_id));
  YONDER_TRY(st->bind(2, job.provider_id));
  YONDER_TRY(st->bind(3, job.state));
  nlohmann::json spec = job.spec.is_object() ? job.spec : nlohmann::json::object();
  spec["observed"] = job.observed.to_json();
  YONDER_TRY(st->bind(4, spec.dump()));
  if (job.exit_code) {
    YONDER_TRY(st->bind(5, static_cast<int64_t>(*job.exit_code)));
  } else {
    YONDER_TRY(st->bind(5, nullptr));
  }
  YONDER_TRY(st->bind(6, job.last.dump()));
  YONDER_TRY(st->bind(7, job.created_at));
  YONDER_TRY(st->bind(8, job.updated_at == 0 ? unix_now_s() : job.updated_at));
  auto done = st->step();
  if (!done) return std::move(done).error();
  return ok_status();
}

Status ConsumerJobStore::update_from_view(const nlohmann::json& view, int64_t seen_ms) {
  if (!view.is_object() || !view.contains("job_id") || !view["job_id"].is_string()) return ok_status();
  auto job = find(view["job_id"].get<std::string>());
  if (!job || job->job_id != view["job_id"]) return ok_status();  // not one of ours
  job->state = view.value("state", job->state);
  if (view.contains("exit_code") && view["exit_code"].is_number_integer()) job->exit_code = view["exit_code"].get<int>();
  if (job->state == "running" && job->observed.first_running_ms == 0) job->observed.first_running_ms = seen_ms;
  if (job->finished() && job->observed.ended_ms == 0) {
    job->observed.ended_ms = seen_ms;
    job->observed.exit_code = job->exit_code;
  }
  job->last = view;
  job->updated_at = unix_now_s();
  return save(*job);
}

Status ConsumerJobStore::record_cleanup(const nlohmann::json& view) {
  if (!view.is_object() || !view.contains("job_id") || !view["job_id"].is_string()) return ok_status();
  auto job = find(view["job_id"].get<std::string>());
  if (!job || job->job_id != view["job_id"] || !job->finished()) return ok_status();
  bool changed = false;
  for (const char* key : {"workspace_removed_at", "log_removed_at"}) {
    if (view.contains(key) && view[key].is_number_integer() && !job->last.contains(key)) {
      job->last[key] = view[key];
      changed = true;
    }
  }
  return changed ? save(*job) : ok_status();
}

Result<ConsumerJob> ConsumerJobStore::read_row(store::Statement& st) {
  ConsumerJob j;
  j.job_id = st.column_text(0);
  j.provider_id = st.column_text(1);
  j.state = st.column_text(2);
  j.spec = nlohmann::json::parse(st.column_text(3), nullptr, false);
  if (!j.spec.is_object()) j.spec = nlohmann::json::object();
  if (j.spec.contains("observed")) {
    j.observed = ConsumerObservation::from_json(j.spec["observed"]);
    j.spec.erase("observed");
  }
  if (auto code = st.column_optional_int64(4)) j.exit_code = static_cast<int>(*code);
  j.last = nlohmann::json::parse(st.column_optional_text(5).value_or("{}"), nullptr, false);
  if (!j.last.is_object()) j.last = nlohmann::json::object();
  j.created_at = st.column_int64(6);
  j.updated_at = st.column_int64(7);
  return j;
}

Result<ConsumerJob> ConsumerJobStore::find(const std::string& id_or_prefix) {
  // A full id is one keyed row (every view a provider answers is looked up
  // this way, so `ps --all` must not read the whole table per job).
  {
    std::lock_guard lock(mutex_);
    auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM jobs WHERE side = 'consumer' AND job_id = ?1");
    if (!st) return std::move(st).error();
    YONDER_TRY(st->bind(1, std::string_view(id_or_prefix)));
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (*row) return read_row(*st);
  }
  auto all = list();
  if (!all) return std::move(all).error();
  std::vector<ConsumerJob> hits;
  std::optional<ConsumerJob> named;  // the newest of that name: the list is oldest first
  for (auto& j : *all) {
    if (j.job_id == id_or_prefix) return j;
    if (auto n = j.spec.find("name"); n != j.spec.end() && n->is_string() && *n == id_or_prefix) named = j;
    if (id_or_prefix.size() >= 4 && j.job_id.rfind(id_or_prefix, 0) == 0) hits.push_back(j);
  }
  if (named) return *named;
  if (hits.size() == 1) return hits[0];
  if (hits.size() > 1) {
    return make_error(ErrorCode::kInvalidArgument, "job id prefix \"" + id_or_prefix + "\" matches " +
                                                       std::to_string(hits.size()) + " jobs; give more of it");
  }
  return make_error(ErrorCode::kNotFound, "no job \"" + id_or_prefix.substr(0, 64) +
                                              "\" was submitted from this node; `yonder ps --all` lists them");
}

Result<std::vector<ConsumerJob>> ConsumerJobStore::list() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM jobs WHERE side = 'consumer' ORDER BY created_at, rowid");
  if (!st) return std::move(st).error();
  std::vector<ConsumerJob> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    auto j = read_row(*st);
    if (!j) return std::move(j).error();
    out.push_back(std::move(*j));
  }
  return out;
}

}  // namespace yonder::jobs::consumer
