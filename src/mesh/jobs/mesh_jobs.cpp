#include "mesh/jobs/mesh_jobs.h"
#include "mesh/jobs/mesh_jobs_state.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <filesystem>
#include <set>

#include "base/bytes.h"
#include "base/clock.h"
#include "crypto/random_id.h"
#include "jobs/metering/verifications.h"
#include "jobs/protocol/job_request.h"
#include "mesh/jobs/mesh_replicas.h"
#include "mesh/core/quorum.h"

namespace yonder::mesh {
namespace asio = boost::asio;
namespace fs = std::filesystem;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr uint64_t kMaxRetries = 100;
// How often a running attempt is asked how it is: a quarter of
// mesh.provider_timeout_s, at most half a second (an array's short tasks
// wait for this to learn that they ended).
constexpr std::chrono::milliseconds kMaxTick{500};
constexpr std::chrono::milliseconds kMinTick{100};
constexpr uint64_t kMaxReplicas = 9;

bool mesh_jobs_finished_state(const std::string& s) {
  return supervisor::job_ended(supervisor::parse_attempt_state(s));
}

// Files under `dir`, recursively (0 when it does not exist).
size_t count_files(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) ++n;
  }
  return n;
}

// Mirrors `from` into `to` with hard links (copies across file systems),
// leaving out the top-level names in `skip`. Links stay links.
Status link_tree(const fs::path& from, const fs::path& to, const std::set<std::string>& skip) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot create " + to.string() + ": " + ec.message());
  fs::recursive_directory_iterator it(from, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + from.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + from.string() + ": " + ec.message());
    fs::path rel = it->path().lexically_relative(from);
    if (it.depth() == 0 && skip.count(rel.string()) > 0) {
      it.disable_recursion_pending();
      continue;
    }
    fs::path dest = to / rel;
    std::error_code e2;
    if (it->is_symlink(e2)) {
      fs::copy_symlink(it->path(), dest, e2);
    } else if (it->is_directory(e2)) {
      fs::create_directories(dest, e2);
    } else if (it->is_regular_file(e2)) {
      fs::create_hard_link(it->path(), dest, e2);
      if (e2) {
        e2.clear();
        fs::copy_file(it->path(), dest, fs::copy_options::overwrite_existing, e2);
      }
    }
    if (e2)
      return make_error(ErrorCode::kFailedPrecondition, "cannot stage " + it->path().string() + ": " + e2.message());
  }
  return ok_status();
}

// The folder an attempt uploads: the job's own folder, or (with a
// checkpoint) a staged copy of it with the checkpoint in `checkpoint/`.
struct Staged {
  std::string dir;        // what to upload ("" for nothing)
  std::string temporary;  // a staged folder to remove after the upload
  size_t checkpoint_files = 0;
};
Result<Staged> stage_upload(const std::string& source, const std::string& job_dir, int attempt) {
  Staged s;
  s.dir = source;
  std::string checkpoint = job_dir + "/checkpoint";
  s.checkpoint_files = count_files(checkpoint);
  if (s.checkpoint_files == 0) return s;
  s.temporary = job_dir + "/upload-" + std::to_string(attempt);
  std::error_code ec;
  fs::remove_all(s.temporary, ec);
  if (!source.empty()) YONDER_TRY(link_tree(source, s.temporary, {".git", "checkpoint"}));
  fs::create_directories(s.temporary, ec);
  fs::copy(checkpoint, s.temporary + "/checkpoint", fs::copy_options::recursive, ec);
  if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot stage the checkpoint: " + ec.message());
  s.dir = s.temporary;
  return s;
}

Result<std::chrono::milliseconds> seconds_setting(const config::Config& cfg, const char* key, int64_t max) {
  int64_t v = cfg.get_int(key);
  if (v <= 0 || v > max) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(key) + " must be between 1 and " + std::to_string(max) + "; fix it in config.toml");
  }
  return std::chrono::milliseconds(v * 1000);
}

}  // namespace

Result<MeshJobSettings> mesh_job_settings_from_config(const config::Config& cfg) {
  MeshJobSettings s;
  auto timeout = seconds_setting(cfg, "mesh.provider_timeout_s", 86400);
  if (!timeout) return std::move(timeout).error();
  s.provider_timeout = *timeout;
  auto interval = seconds_setting(cfg, "mesh.checkpoint_interval_s", 86400);
  if (!interval) return std::move(interval).error();
  s.checkpoint_interval = *interval;
  int64_t requeues = cfg.get_int("mesh.max_requeues");
  if (requeues < 0 || requeues > 100) {
    return make_error(ErrorCode::kInvalidArgument,
                      "mesh.max_requeues must be between 0 and 100; fix it in config.toml");
  }
  s.max_requeues = static_cast<uint32_t>(requeues);
  return s;
}

MeshJobs::MeshJobs(asio::io_context& io, asio::any_io_executor blocking, LoopTimers& timers, reach::Peers& link,
                   AttemptServices& attempts, std::unique_ptr<MeshJobStore> store, std::string dir,
                   MeshJobSettings settings)
    : io_(io),
      blocking_(std::move(blocking)),
      timers_(timers),
      link_(link),
      attempts_(attempts),
      store_(std::move(store)),
      dir_(std::move(dir)),
      settings_(settings),
      writer_(std::make_unique<Writer>(blocking_)) {}

MeshJobs::~MeshJobs() {
  *alive_ = false;
  for (auto& [_, l] : live_) {
    for (auto& s : l->slots) s->timer.reset();
  }
}

std::shared_ptr<MeshJobs::Live> MeshJobs::make_live(MeshJobRow row) {
  auto live = std::make_shared<Live>();
  live->row = std::move(row);
  int replicas = static_cast<int>(std::clamp<uint64_t>(live->row.spec.value("replicas", uint64_t{1}), 1, kMaxReplicas));
  for (int r = 0; r < replicas; ++r) live->slots.push_back(std::make_unique<Slot>(r));
  return live;
}

Status MeshJobs::start() {
  asio::post(blocking_, [this, alive = alive_] {
    auto rows = store_->list(true);
    asio::post(io_, [this, alive, rows = std::move(rows)]() mutable {
      if (!*alive) return;
      if (!rows) {
        spdlog::warn("mesh jobs: cannot read the jobs a previous run left: {}", rows.error().to_string());
        return;
      }
      for (auto& row : *rows) {
        auto live = make_live(std::move(row));
        live_[live->row.id] = live;
        for (size_t i = 0; i < live->row.attempts.size(); ++i) {
          const MeshAttempt& a = live->row.attempts[i];
          if (a.replica < 0 || a.replica >= live->replicas()) continue;
          Slot& s = *live->slots[static_cast<size_t>(a.replica)];
          if (!a.ended()) {
            s.current = static_cast<int>(i);
          } else if (a.state == "exited" && (live->replicas() > 1 || a.exit_code == 0)) {
            s.done = true;
            s.answer = static_cast<int>(i);
          } else {
            s.failed_on.insert(a.provider_id);
          }
        }
        spdlog::info("mesh job {}: picked up again", live->row.id.substr(0, 12));
        for (int r = 0; r < live->replicas(); ++r) {
          Slot& s = *live->slots[static_cast<size_t>(r)];
          MeshAttempt* a = live->attempt(s);
          if (s.done) continue;
          if (a && a->state == "running" && !a->job_id.empty()) {
            watch(live, r);
          } else if (a) {
            // Cut short during its upload: that attempt never started.
            a->state = "not started";
            a->why = "the daemon stopped while it was being submitted";
            a->ended_at = unix_seconds(timers_.now());
            s.current = -1;
            save(live, [this, live, r] { place(live, r); });
          } else {
            place(live, r);
          }
        }
        if (std::all_of(live->slots.begin(), live->slots.end(), [](const auto& s) { return s->done; })) verify(live);
      }
    });
  });
  return ok_status();
}

void MeshJobs::add_routes(api::Router& router) {
  router.add("POST", "/v1/mesh/jobs", [this](const Request& req, Reply reply) {
    auto spec = parse_mesh_job_spec(api::body_json(req));
    if (!spec) return reply(Response::error(spec.error()));
    create(std::move(*spec), api::answer_with(std::move(reply)));
  });
  router.add("GET", "/v1/mesh/jobs/inspect", [this](const Request& req, Reply reply) {
    inspect(api::parse_query(req.query)["id"], api::answer_with(std::move(reply)));
  });
  router.add("GET", "/v1/mesh/jobs", [this](const Request& req, Reply reply) {
    bool all = api::parse_query(req.query)["all"] == "1";
    asio::post(blocking_, [this, all, reply] {
      auto rows = store_->list(!all);
      asio::post(io_, [this, rows = std::move(rows), reply] {
        if (!rows) return reply(Response::error(rows.error()));
        nlohmann::json jobs = nlohmann::json::array();
        for (const auto& r : *rows) {
          auto l = live_.find(r.id);
          jobs.push_back(l != live_.end() ? view(*l->second) : r.to_json());
        }
        reply(Response::json(200, {{"jobs", jobs}}));
      });
    });
  });
  router.add("POST", "/v1/mesh/jobs/stop", [this](const Request& req, Reply reply) {
    auto b = api::body_json(req);
    std::string id = b.is_object() && b.contains("mesh_job_id") && b["mesh_job_id"].is_string()
                         ? b["mesh_job_id"].get<std::string>()
                         : "";
    stop_job(id, api::answer_with(std::move(reply)));
  });
}

void MeshJobs::inspect(const std::string& id, api::Answer answer) {
  for (const auto& [key, l] : live_) {
    if (!id.empty() && key.compare(0, id.size(), id) == 0) return answer(view(*l));
  }
  asio::post(blocking_, [this, id, answer] {
    auto row = store_->find(id);
    asio::post(io_, [row = std::move(row), answer] {
      if (!row) return answer(row.error());
      answer(row->to_json());
    });
  });
}

void MeshJobs::stop_job(const std::string& id, api::Answer reply) {
  if (id.empty())
    return reply(make_error(ErrorCode::kInvalidArgument, "the body needs \"mesh_job_id\""));
  std::shared_ptr<Live> live;
  for (const auto& [key, l] : live_) {
    if (key.compare(0, id.size(), id) == 0) live = l;
  }
  if (!live) {
    return reply(
        make_error(ErrorCode::kNotFound, "no running mesh job " + id + " here; `yonder mesh jobs` lists them"));
  }
  run(live, supervisor::StopRequested{});
  reply(nlohmann::json(view(*live)));
}

nlohmann::json MeshJobs::view(const Live& live) const {
  nlohmann::json j = live.row.to_json();
  // The attempt in flight of the first replica still running (what `run` follows).
  j["current_attempt"] = nullptr;
  for (const auto& s : live.slots) {
    if (s->current >= 0) {
      j["current_attempt"] = live.row.attempts[static_cast<size_t>(s->current)].attempt;
      break;
    }
  }
  j["checkpoint_files"] = live.checkpoint_files;
  return j;
}

Result<MeshJobSpec> parse_mesh_job_spec(const nlohmann::json& b) {
  auto bad = [](const std::string& why) { return make_error(ErrorCode::kInvalidArgument, why); };
  if (!b.is_object() || !b.contains("job")) return bad("the body needs \"job\"");
  MeshJobSpec spec;
  auto request = jobs::protocol::parse_job_request(b["job"]);
  if (!request) return std::move(request).error();
  spec.job = std::move(*request);
  if (b.contains("dir")) {
    if (!b["dir"].is_string()) return bad("\"dir\" must be an absolute path");
    spec.dir = b["dir"].get<std::string>();
  }
  if (!spec.dir.empty() && spec.dir.front() != '/') return bad("\"dir\" must be an absolute path");
  spec.needs = b.value("needs", nlohmann::json::object());
  if (!spec.needs.is_object()) return bad("\"needs\" must be an object");
  auto retries = api::body_uint(b, "retries", 0, kMaxRetries);
  if (!retries) return std::move(retries).error();
  spec.retries = *retries;
  auto replicas = api::body_uint(b, "replicas", 1, kMaxReplicas);
  if (!replicas) return std::move(replicas).error();
  if (*replicas == 0) return bad("\"replicas\" must be 1 or more");
  spec.replicas = *replicas;
  if (b.contains("validator")) {
    if (!b["validator"].is_string() || b["validator"].get<std::string>().size() > 4096) {
      return bad("\"validator\" must be a command line");
    }
    spec.validator = b["validator"].get<std::string>();
  }
  if (b.contains("outputs_limit")) {
    if (b["outputs_limit"] != "off") return bad("\"outputs_limit\" can only be \"off\"");
    spec.outputs_unlimited = true;
  }
  return spec;
}

void MeshJobs::create(MeshJobSpec spec, api::Answer reply) {
  MeshJobRow row;
  row.id = random_hex_id(16);
  row.state = "running";
  row.spec = {{"job", spec.job.to_json()}, {"dir", spec.dir}, {"needs", spec.needs}, {"retries", spec.retries},
              {"replicas", spec.replicas}};
  if (!spec.validator.empty()) row.spec["validator"] = spec.validator;
  if (spec.outputs_unlimited) row.spec["outputs_limit"] = "off";
  row.created_at = unix_seconds(timers_.now());
  auto live = make_live(std::move(row));
  asio::post(writer_->strand, [this, alive = alive_, live, reply] {
    std::error_code ec;
    fs::create_directories(job_dir(live->row.id), ec);
    Status st = ec ? Status(make_error(ErrorCode::kFailedPrecondition,
                                       "cannot create " + job_dir(live->row.id) + ": " + ec.message()))
                   : store_->put(live->row);
    asio::post(io_, [this, alive, live, reply, st = std::move(st)] {
      if (!*alive) return;
      if (!st) return reply(st.error());
      live_[live->row.id] = live;
      spdlog::info("mesh job {}: accepted ({} replica(s))", live->row.id.substr(0, 12), live->replicas());
      reply(nlohmann::json(view(*live)));
      for (int r = 0; r < live->replicas(); ++r) place(live, r);
    });
  });
}

void MeshJobs::place(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  if (live->done) return;
  supervisor::Placement p = supervisor::placement_for(core_state(*live), r);
  if (p.what == supervisor::Placement::What::kNothing) return;
  if (p.what == supervisor::Placement::What::kWait) {
    s.waiting = true;
    return;
  }
  nlohmann::json needs = live->row.spec.value("needs", nlohmann::json::object());
  if (!p.exclude.empty()) needs["exclude"] = p.exclude;
  // The placeholder (current -2) keeps a sibling placed at the same moment
  // off the provider this one is being offered (the lease answers first).
  run(live, supervisor::PlacementStarted{r});
  bool excluding_failed = p.excluding_failed;
  attempts_.lease_for(needs, [this, alive = alive_, live, r, excluding_failed](Result<nlohmann::json> got) {
    if (!*alive) return;
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    // Siblings that waited for this placement go next (after this one's attempt is recorded).
    asio::post(io_, [this, alive, live] {
      if (!*alive) return;
      for (int o = 0; o < live->replicas(); ++o) {
        Slot& other = *live->slots[static_cast<size_t>(o)];
        if (other.waiting && other.current == -1) {
          other.waiting = false;
          return place(live, o);
        }
      }
    });
    if (live->done || sl.done) {
      sl.current = -1;  // the placeholder; nothing more to decide for it
      if (got)
        attempts_.release_lease(PeerId((*got)["provider"].value("node_id", "")), LeaseId(got->value("lease_id", uint64_t{0})),
                            [](Result<nlohmann::json>) {});
      return;
    }
    if (got) return submit(live, r, *got);
    if (excluding_failed) {
      spdlog::info("mesh job {}: no other provider can take it ({}); trying the previous ones too",
                   live->row.id.substr(0, 12), got.error().message());
    }
    auto step = run(live, supervisor::PlacementFailed{r, excluding_failed, got.error().message(),
                                                      error_code_name(got.error().code())});
    for (const auto& a : step.actions) {
      if (std::holds_alternative<supervisor::PlaceLater>(a)) {
        spdlog::info("mesh job {}: cannot place replica {} now ({}); trying again in {} ms", live->row.id.substr(0, 12),
                     r, got.error().message(), settings_.provider_timeout.count());
      }
    }
  });
}

void MeshJobs::submit(const std::shared_ptr<Live>& live, int r, const nlohmann::json& lease) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  std::string provider = lease["provider"].value("node_id", "");
  supervisor::Attempt placed;
  placed.replica = r;
  placed.provider_id = provider;
  placed.provider_name = lease["provider"].value("name", provider);
  placed.state = supervisor::AttemptState::kUploading;
  size_t before = live->row.attempts.size();
  run(live, supervisor::Placed{r, placed});
  if (live->row.attempts.size() == before) return;  // finished or settled meanwhile (the callers check first)
  const MeshAttempt a = live->row.attempts.back();
  s.lease_id = LeaseId(lease.value("lease_id", uint64_t{0}));
  spdlog::info("mesh job {}: attempt {} (replica {}) on {}", live->row.id.substr(0, 12), a.attempt, r, a.provider_name);
  // An attempt that never started: the lease goes back, the job goes elsewhere.
  auto not_started = [this, live, r, provider, n = a.attempt](const Error& e) {
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    attempts_.release_lease(PeerId(provider), sl.lease_id, [](Result<nlohmann::json>) {});
    MeshAttempt* cur = live->attempt(sl);
    if (cur == nullptr || cur->attempt != n) return;
    spdlog::info("mesh job {}: attempt {} did not start: {}", live->row.id.substr(0, 12), n, e.message());
    run(live, supervisor::SubmitFailed{r, e.message()});
  };
  auto target = link_.target(provider);
  if (!target) return not_started(target.error());
  // Only a lone replica resumes from a checkpoint: replicas stay independent.
  bool checkpointed = live->replicas() == 1;
  save(live, [this, alive = alive_, live, r, t = *target, n = a.attempt, not_started, checkpointed] {
    std::string source = live->row.spec.value("dir", "");
    asio::post(blocking_, [this, alive, live, r, t, n, not_started, source, checkpointed] {
      auto staged =
          checkpointed ? stage_upload(source, job_dir(live->row.id), n) : Result<Staged>(Staged{source, "", 0});
      asio::post(io_, [this, alive, live, r, t, n, not_started, staged = std::move(staged)] {
        if (!*alive || live->done) return;
        if (!staged) return not_started(staged.error());
        Slot& sl = *live->slots[static_cast<size_t>(r)];
        if (staged->checkpoint_files > 0) {
          if (MeshAttempt* cur = live->attempt(sl)) {
            cur->why = "from checkpoint: " + std::to_string(staged->checkpoint_files) + " file(s)";
          }
        }
        std::string transfer_id = "mesh-" + live->row.id.substr(0, 12) + "-" + std::to_string(n);
        // The job as accepted (create() stored it with JobRequest's encoder).
        auto job = jobs::protocol::parse_job_request(live->row.spec.value("job", nlohmann::json::object()));
        if (!job) return not_started(Error(job.error()).with_context("the stored mesh job"));
        attempts_.submit(
            t, *job, staged->dir, transfer_id,
            [this, alive, live, r, t, n, not_started, temporary = staged->temporary](Result<nlohmann::json> got) {
              if (!temporary.empty()) {
                asio::post(blocking_, [temporary] {
                  std::error_code ec;
                  fs::remove_all(temporary, ec);
                });
              }
              if (!*alive) return;
              if (!got) return not_started(got.error());
              std::string job_id = got->value("job_id", "");
              if (live->done) {  // stopped while it was being submitted
                attempts_.call_job(job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
                return;
              }
              Slot& s2 = *live->slots[static_cast<size_t>(r)];
              MeshAttempt* cur = live->attempt(s2);
              if (cur == nullptr || cur->attempt != n) return;
              cur->job_id = job_id;
              cur->state = "running";
              attempts_.bind_lease(PeerId(t.node_id), s2.lease_id, JobId(job_id), [id = live->row.id](Result<nlohmann::json> b) {
                if (!b)
                  spdlog::warn("mesh job {}: binding the lease failed: {}", id.substr(0, 12), b.error().message());
              });
              if (live->stopping) {
                attempts_.call_job(job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
              }
              save(live, [this, live, r] { watch(live, r); });
            });
      });
    });
  });
}

void MeshJobs::watch(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  s.last_checkpoint = timers_.steady_now();
  run(live, supervisor::ProviderAnswered{r});
  tick(live, r);
}

void MeshJobs::tick(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (live->done || a == nullptr || a->state != "running") return;
  int n = a->attempt;
  size_t index = static_cast<size_t>(s.current);
  if (!run(live, supervisor::Tick{r}).actions.empty()) {
    // Its provider went silent: the attempt is lost, and the replica requeued or given up.
    spdlog::warn("mesh job {}: {}; requeueing", live->row.id.substr(0, 12), live->row.attempts[index].why);
    return;
  }
  auto now = timers_.steady_now();
  if (s.inspecting != n) {
    s.inspecting = n;
    attempts_.call_job(a->job_id, "run.inspect", nlohmann::json::object(), true,
                     [this, alive = alive_, live, r, n](Result<nlohmann::json> got) {
                       if (!*alive) return;
                       Slot& sl = *live->slots[static_cast<size_t>(r)];
                       if (sl.inspecting == n) sl.inspecting = 0;
                       MeshAttempt* cur = live->attempt(sl);
                       if (live->done || cur == nullptr || cur->attempt != n || cur->state != "running") return;
                       if (!got) {
                         spdlog::debug("mesh job {}: inspect failed: {}", live->row.id.substr(0, 12),
                                       got.error().message());
                         return;
                       }
                       run(live, supervisor::ProviderAnswered{r});
                       if (mesh_jobs_finished_state(got->value("state", ""))) attempt_ended(live, r, *got);
                     });
  }
  if (live->replicas() == 1 && now - s.last_checkpoint >= settings_.checkpoint_interval && s.fetching != n) {
    sync_checkpoint(live, r);
  }
  auto period = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(settings_.provider_timeout / 4),
                           kMinTick, kMaxTick);
  s.timer = timers_.after(period, [this, alive = alive_, live, r] {
    if (*alive) tick(live, r);
  });
}

void MeshJobs::sync_checkpoint(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (a == nullptr) return;
  int n = a->attempt;
  s.fetching = n;
  nlohmann::json body = {{"job_id", a->job_id}, {"dir", job_dir(live->row.id)}, {"paths", {"checkpoint"}}};
  attempts_.fetch_into(body, [this, alive = alive_, live, r, n](Result<nlohmann::json> got) {
    if (!*alive) return;
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    if (sl.fetching == n) sl.fetching = 0;
    sl.last_checkpoint = timers_.steady_now();
    if (!got) {
      // Most often: the job has written no checkpoint yet.
      spdlog::debug("mesh job {}: no checkpoint fetched: {}", live->row.id.substr(0, 12), got.error().message());
      return;
    }
    live->checkpoint_files = (*got)["files"].size();
    spdlog::debug("mesh job {}: checkpoint synced ({} file(s))", live->row.id.substr(0, 12), live->checkpoint_files);
  });
}

nlohmann::json MeshJobs::result_of(const MeshAttempt& a) {
  nlohmann::json result = {
      {"job_id", a.job_id}, {"attempt", a.attempt}, {"provider_id", a.provider_id}, {"provider_name", a.provider_name},
      {"state", a.state},   {"message", a.why}};
  result["exit_code"] = a.exit_code ? nlohmann::json(*a.exit_code) : nlohmann::json();
  return result;
}

void MeshJobs::attempt_ended(const std::shared_ptr<Live>& live, int r, const nlohmann::json& v) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (a == nullptr) return;
  size_t index = static_cast<size_t>(s.current);
  supervisor::AttemptEnded e;
  e.replica = r;
  e.state = supervisor::parse_attempt_state(v.value("state", "failed"));
  if (v.contains("exit_code") && v["exit_code"].is_number_integer()) e.exit_code = v["exit_code"].get<int>();
  e.why = v.value("message", "");
  auto step = run(live, e);
  const MeshAttempt& ended = live->row.attempts[index];
  if (s.done && s.answer == static_cast<int>(index)) {
    spdlog::info("mesh job {}: replica {} answered on {}", live->row.id.substr(0, 12), r, ended.provider_name);
  } else if (!step.actions.empty() && std::holds_alternative<supervisor::PlaceReplica>(step.actions.front())) {
    spdlog::info("mesh job {}: attempt {} on {} ended ({}); retrying elsewhere", live->row.id.substr(0, 12),
                 ended.attempt, ended.provider_name, ended.why);
  }
}

supervisor::JobState MeshJobs::core_state(const Live& live) const {
  supervisor::JobState st;
  st.retries_allowed = live.row.spec.value("retries", uint64_t{0});
  st.stopping = live.stopping;
  st.finished = live.done;
  st.deciding = live.verifying;
  for (const auto& a : live.row.attempts) {
    supervisor::Attempt c;
    c.replica = a.replica;
    c.provider_id = a.provider_id;
    c.provider_name = a.provider_name;
    c.state = supervisor::parse_attempt_state(a.state);
    c.exit_code = a.exit_code;
    c.why = a.why;
    st.attempts.push_back(std::move(c));
  }
  for (const auto& s : live.slots) {
    supervisor::Slot c;
    c.current = s->current;
    c.answer = s->answer;
    c.settled = s->done;
    c.failed_on = s->failed_on;
    c.allow_failed = s->allow_failed;
    c.placement_failures = s->placement_failures;
    c.last_answer = s->last_answer;
    c.place_again_at = s->place_again_at;
    st.slots.push_back(std::move(c));
  }
  return st;
}

void MeshJobs::adopt(Live& live, const supervisor::JobState& st) {
  // `finished` and `deciding` are not taken back: finish() and verify() set
  // them when they act on the core's FinishJob and DecideQuorum.
  live.stopping = st.stopping;
  for (size_t i = 0; i < st.attempts.size(); ++i) {
    const supervisor::Attempt& c = st.attempts[i];
    std::string state = supervisor::attempt_state_name(c.state);
    if (i >= live.row.attempts.size()) {
      MeshAttempt a;
      a.attempt = static_cast<int>(i) + 1;
      a.replica = c.replica;
      a.provider_id = c.provider_id;
      a.provider_name = c.provider_name;
      a.state = state;
      a.why = c.why;
      a.exit_code = c.exit_code;
      a.started_at = unix_seconds(timers_.now());
      live.row.attempts.push_back(std::move(a));
      continue;
    }
    MeshAttempt& a = live.row.attempts[i];
    // A word the core does not know stays as it was unless the core moved it.
    bool moved = supervisor::parse_attempt_state(a.state) != c.state;
    if (!moved && a.why == c.why && a.exit_code == c.exit_code) continue;
    bool was_ended = a.ended();
    if (moved) a.state = state;
    a.why = c.why;
    a.exit_code = c.exit_code;
    if (!was_ended && a.ended()) a.ended_at = unix_seconds(timers_.now());
  }
  for (size_t r = 0; r < st.slots.size() && r < live.slots.size(); ++r) {
    const supervisor::Slot& c = st.slots[r];
    Slot& s = *live.slots[r];
    s.current = c.current;
    s.answer = c.answer;
    s.done = c.settled;
    s.failed_on = c.failed_on;
    s.allow_failed = c.allow_failed;
    s.placement_failures = c.placement_failures;
    s.last_answer = c.last_answer;
    s.place_again_at = c.place_again_at;
  }
}

supervisor::Step MeshJobs::run(const std::shared_ptr<Live>& live, const supervisor::Event& event) {
  supervisor::Settings settings{settings_.provider_timeout, settings_.max_requeues};
  supervisor::Step step = supervisor::on_event(core_state(*live), event, timers_.steady_now(), settings);
  adopt(*live, step.state);
  apply(live, step.actions);
  return step;
}

void MeshJobs::apply(const std::shared_ptr<Live>& live, const std::vector<supervisor::Action>& actions) {
  for (const auto& action : actions) {
    if (const auto* stop = std::get_if<supervisor::StopAttempt>(&action)) {
      const MeshAttempt& a = live->row.attempts[static_cast<size_t>(stop->attempt)];
      attempts_.call_job(a.job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
    } else if (const auto* place_it = std::get_if<supervisor::PlaceReplica>(&action)) {
      int r = place_it->replica;
      if (place_it->save_first) {
        save(live, [this, live, r] { place(live, r); });
      } else {
        place(live, r);
      }
    } else if (const auto* later = std::get_if<supervisor::PlaceLater>(&action)) {
      Slot& sl = *live->slots[static_cast<size_t>(later->replica)];
      sl.timer = timers_.at(later->at, [this, alive = alive_, live, r = later->replica] {
        if (*alive) run(live, supervisor::Tick{r});
      });
    } else if (std::holds_alternative<supervisor::SaveJob>(action)) {
      save(live);
    } else if (std::holds_alternative<supervisor::DecideQuorum>(action)) {
      save(live, [this, live] { maybe_verify(live); });
    } else if (const auto* fin = std::get_if<supervisor::FinishJob>(&action)) {
      nlohmann::json result;
      if (fin->attempt) {
        result = result_of(live->row.attempts[static_cast<size_t>(*fin->attempt)]);
      } else {
        result = {{"message", fin->message}, {"exit_code", nullptr}};
        if (fin->unplaced) result["reason"] = "unplaced";
        if (!fin->code.empty()) result["code"] = fin->code;
      }
      finish(live, fin->state, std::move(result));
    }
  }
}

void MeshJobs::finish(const std::shared_ptr<Live>& live, const std::string& state, nlohmann::json result) {
  if (live->done) return;
  live->done = true;
  for (auto& s : live->slots) s->timer.reset();
  live->row.state = state;
  live->row.result = std::move(result);
  spdlog::info("mesh job {}: {}", live->row.id.substr(0, 12), state);
  save(live, [this, live] { live_.erase(live->row.id); });
}

void MeshJobs::save(const std::shared_ptr<Live>& live, std::function<void()> then) {
  MeshJobRow row = live->row;  // a copy: the pool must not read what the loop changes
  asio::post(writer_->strand, [this, alive = alive_, row = std::move(row), then = std::move(then)] {
    Status st = store_->put(row);
    for (const auto& a : row.attempts) {
      if (st) st = store_->put_attempt(row.id, a);
    }
    if (!st) spdlog::warn("mesh job {}: could not be saved: {}", row.id.substr(0, 12), st.error().to_string());
    asio::post(io_, [alive, then] {
      if (*alive && then) then();
    });
  });
}

}  // namespace yonder::mesh
