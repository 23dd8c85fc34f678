#include "jobs/provider/job_store.h"

namespace yonder::jobs::provider {
namespace {

constexpr const char* kColumns = "job_id, peer_id, state, spec_json, handle_json, exit_code, result_json, created_at, updated_at";

Error corrupt(const std::string& job, const std::string& what) {
  return make_error(ErrorCode::kDataLoss, "stored job " + job + " has a damaged " + what +
                                              "; remove it with the provider jobs API or restore the state folder");
}

}  // namespace

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kStarting: return "starting";
    case JobState::kRunning: return "running";
    case JobState::kExited: return "exited";
    case JobState::kStopped: return "stopped";
    case JobState::kFailed: return "failed";
  }
  return "?";
}

std::optional<JobState> job_state_from_name(std::string_view name) {
  if (name == "queued") return JobState::kPending;  // its name before schema v14, and from older peers
  for (auto s : {JobState::kPending, JobState::kStarting, JobState::kRunning, JobState::kExited, JobState::kStopped,
                 JobState::kFailed}) {
    if (name == job_state_name(s)) return s;
  }
  return std::nullopt;
}

Status JobStore::save(const JobRecord& job) {
  std::lock_guard lock(mutex_);
  return db_.transaction([&]() -> Status {
    auto st = db_.prepare(std::string("INSERT INTO jobs (") + kColumns + ", side) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'provider') "
                          "ON CONFLICT(job_id) DO UPDATE SET state = ?3, spec_json = ?4, handle_json = ?5, exit_code = ?6, "
                          "result_json = ?7, updated_at = ?9");
    if (!st) return std::move(st).error();
    YONDER_TRY(st->bind(1, job.job_id));
    YONDER_TRY(st->bind(2, job.peer_id));
    YONDER_TRY(st->bind(3, std::string_view(job_state_name(job.state))));
    YONDER_TRY(st->bind(4, terms_to_json(job.terms).dump()));
    if (job.handle) {
      YONDER_TRY(st->bind(5, job.handle->to_json().dump()));
    } else {
      YONDER_TRY(st->bind(5, nullptr));
    }
    if (job.exit_code) {
      YONDER_TRY(st->bind(6, static_cast<int64_t>(*job.exit_code)));
    } else {
      YONDER_TRY(st->bind(6, nullptr));
    }
    YONDER_TRY(st->bind(7, job.result.dump()));
    YONDER_TRY(st->bind(8, job.created_at));
    YONDER_TRY(st->bind(9, job.updated_at));
    auto done = st->step();
    if (!done) return std::move(done).error();
    auto del = db_.prepare("DELETE FROM job_gpu_leases WHERE job_id = ?1");
    if (!del) return std::move(del).error();
    YONDER_TRY(del->bind(1, job.job_id));
    if (auto r = del->step(); !r) return std::move(r).error();
    for (const auto& uuid : job.gpu_uuids) {
      auto ins = db_.prepare("INSERT INTO job_gpu_leases (gpu_uuid, job_id) VALUES (?1, ?2)");
      if (!ins) return std::move(ins).error();
      YONDER_TRY(ins->bind(1, uuid));
      YONDER_TRY(ins->bind(2, job.job_id));
      auto r = ins->step();
      if (!r) {
        return make_error(ErrorCode::kAlreadyExists, "GPU " + uuid + " is already leased to another job (" +
                                                         r.error().message() + ")");
      }
    }
    return ok_status();
  });
}

Result<JobRecord> JobStore::read_row(store::Statement& st) {
  JobRecord r;
  r.job_id = st.column_text(0);
  r.peer_id = st.column_text(1);
  auto state = job_state_from_name(st.column_text(2));
  if (!state) return corrupt(r.job_id, "state");
  r.state = *state;
  auto terms = terms_from_json(nlohmann::json::parse(st.column_text(3), nullptr, false));
  if (!terms) return corrupt(r.job_id, "spec (" + terms.error().message() + ")");
  r.terms = std::move(*terms);
  if (auto h = st.column_optional_text(4)) {
    auto j = nlohmann::json::parse(*h, nullptr, false);
    auto handle = exec::TaskHandle::from_json(j);
    if (!handle) return corrupt(r.job_id, "task handle");
    r.handle = *handle;
  }
  if (auto code = st.column_optional_int64(5)) r.exit_code = static_cast<int>(*code);
  if (auto res = st.column_optional_text(6)) {
    r.result = nlohmann::json::parse(*res, nullptr, false);
    if (r.result.is_discarded() || !r.result.is_object()) return corrupt(r.job_id, "result");
  }
  r.created_at = st.column_int64(7);
  r.updated_at = st.column_int64(8);
  auto leases = db_.prepare("SELECT gpu_uuid FROM job_gpu_leases WHERE job_id = ?1 ORDER BY gpu_uuid");
  if (!leases) return std::move(leases).error();
  YONDER_TRY(leases->bind(1, r.job_id));
  while (true) {
    auto row = leases->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    r.gpu_uuids.push_back(leases->column_text(0));
  }
  return r;
}

Result<std::optional<JobRecord>> JobStore::get(const JobId& job_id) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM jobs WHERE side = 'provider' AND job_id = ?1");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, job_id.value()));
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<JobRecord>();
  auto r = read_row(*st);
  if (!r) return std::move(r).error();
  return std::optional<JobRecord>(std::move(*r));
}

Result<std::vector<JobRecord>> JobStore::list() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM jobs WHERE side = 'provider' ORDER BY rowid");
  if (!st) return std::move(st).error();
  std::vector<JobRecord> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    auto r = read_row(*st);
    if (!r) return std::move(r).error();
    out.push_back(std::move(*r));
  }
  return out;
}

Status JobStore::remove(const JobId& job_id) {
  std::lock_guard lock(mutex_);
  return db_.transaction([&]() -> Status {
    for (const char* sql : {"DELETE FROM job_gpu_leases WHERE job_id = ?1", "DELETE FROM jobs WHERE side = 'provider' AND job_id = ?1"}) {
      auto st = db_.prepare(sql);
      if (!st) return std::move(st).error();
      YONDER_TRY(st->bind(1, job_id.value()));
      if (auto r = st->step(); !r) return std::move(r).error();
    }
    return ok_status();
  });
}

}  // namespace yonder::jobs::provider
