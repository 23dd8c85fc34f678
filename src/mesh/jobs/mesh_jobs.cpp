#include "mesh/jobs/mesh_jobs.h"
#include "mesh/jobs/mesh_jobs_state.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <set>

#include "base/bytes.h"
#include "base/clock.h"
#include "crypto/random_id.h"
#include "jobs/consumer/remote_consumer.h"
#include "jobs/files/fetch_consumer.h"
#include "jobs/metering/verifications.h"
#include "jobs/provider/job_request.h"
#include "mesh/consumer/mesh_consumer.h"
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
  return s == "exited" || s == "stopped" || s == "failed";
}

// The requeues so far (the provider lost the job, or never started it) and
// the retries (the job itself ended without success).
struct Counts {
  uint32_t requeues = 0;
  uint32_t retries = 0;
};
Counts count_attempts(const MeshJobRow& row, int replica) {
  Counts c;
  for (const auto& a : row.attempts) {
    if (a.replica != replica) continue;
    if (a.state == "lost" || a.state == "not started") ++c.requeues;
    if (mesh_jobs_finished_state(a.state)) ++c.retries;
  }
  return c;
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

MeshJobs::MeshJobs(asio::io_context& io, asio::thread_pool& pool, reach::PeerLink& link, MeshConsumer& mesh,
                   jobs::consumer::RemoteConsumer& remote, jobs::files::FetchConsumer& fetch,
                   std::unique_ptr<MeshJobStore> store, std::string dir, MeshJobSettings settings)
    : io_(io),
      pool_(pool),
      link_(link),
      mesh_(mesh),
      remote_(remote),
      fetch_(fetch),
      store_(std::move(store)),
      dir_(std::move(dir)),
      settings_(settings),
      writer_(std::make_unique<Writer>(pool)) {}

MeshJobs::~MeshJobs() {
  *alive_ = false;
  for (auto& [_, l] : live_) {
    for (auto& s : l->slots) s->timer.cancel();
  }
}

std::shared_ptr<MeshJobs::Live> MeshJobs::make_live(MeshJobRow row) {
  auto live = std::make_shared<Live>();
  live->row = std::move(row);
  int replicas = static_cast<int>(std::clamp<uint64_t>(live->row.spec.value("replicas", uint64_t{1}), 1, kMaxReplicas));
  for (int r = 0; r < replicas; ++r) live->slots.push_back(std::make_unique<Slot>(io_, r));
  return live;
}

void MeshJobs::start() {
  asio::post(pool_, [this, alive = alive_] {
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
            a->ended_at = unix_now_s();
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
}

void MeshJobs::add_routes(api::Router& router) {
  router.add("POST", "/v1/mesh/jobs", [this](const Request& req, Reply reply) {
    create(api::body_json(req), api::answer_with(std::move(reply)));
  });
  router.add("GET", "/v1/mesh/jobs/inspect", [this](const Request& req, Reply reply) {
    inspect(api::parse_query(req.query)["id"], api::answer_with(std::move(reply)));
  });
  router.add("GET", "/v1/mesh/jobs", [this](const Request& req, Reply reply) {
    bool all = api::parse_query(req.query)["all"] == "1";
    asio::post(pool_, [this, all, reply] {
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
    stop(id, api::answer_with(std::move(reply)));
  });
}

void MeshJobs::inspect(const std::string& id, api::Answer answer) {
  for (const auto& [key, l] : live_) {
    if (!id.empty() && key.compare(0, id.size(), id) == 0) return answer(view(*l));
  }
  asio::post(pool_, [this, id, answer] {
    auto row = store_->find(id);
    asio::post(io_, [row = std::move(row), answer] {
      if (!row) return answer(row.error());
      answer(row->to_json());
    });
  });
}

void MeshJobs::stop(const std::string& id, api::Answer reply) {
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
  live->stopping = true;
  bool any_running = false;
  for (auto& s : live->slots) {
    MeshAttempt* a = live->attempt(*s);
    if (a == nullptr || a->state != "running") continue;
    any_running = true;
    remote_.call_job(a->job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
  }
  // Not on a provider: nothing to stop there (a submit on its way is stopped when it lands).
  if (!any_running) finish(live, "stopped", {{"message", "stopped before it ran"}, {"exit_code", nullptr}});
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

void MeshJobs::create(nlohmann::json b, api::Answer reply) {
  if (!b.is_object() || !b.contains("job")) {
    return reply(make_error(ErrorCode::kInvalidArgument, "the body needs \"job\""));
  }
  auto request = jobs::provider::parse_job_request(b["job"]);
  if (!request) return reply(request.error());
  std::string dir = b.contains("dir") && b["dir"].is_string() ? b["dir"].get<std::string>() : "";
  if (!dir.empty() && dir.front() != '/') {
    return reply(make_error(ErrorCode::kInvalidArgument, "\"dir\" must be an absolute path"));
  }
  nlohmann::json needs = b.value("needs", nlohmann::json::object());
  if (!needs.is_object())
    return reply(make_error(ErrorCode::kInvalidArgument, "\"needs\" must be an object"));
  auto retries = api::body_uint(b, "retries", 0, kMaxRetries);
  if (!retries) return reply(retries.error());
  auto replicas = api::body_uint(b, "replicas", 1, kMaxReplicas);
  if (!replicas) return reply(replicas.error());
  if (*replicas == 0)
    return reply(make_error(ErrorCode::kInvalidArgument, "\"replicas\" must be 1 or more"));
  std::string validator;
  if (b.contains("validator")) {
    if (!b["validator"].is_string() || b["validator"].get<std::string>().size() > 4096) {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"validator\" must be a command line"));
    }
    validator = b["validator"].get<std::string>();
  }
  MeshJobRow row;
  row.id = random_hex_id(16);
  row.state = "running";
  row.spec = {{"job", b["job"]}, {"dir", dir}, {"needs", needs}, {"retries", *retries}, {"replicas", *replicas}};
  if (!validator.empty()) row.spec["validator"] = validator;
  if (b.contains("outputs_limit")) {
    if (b["outputs_limit"] != "off") {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"outputs_limit\" can only be \"off\""));
    }
    row.spec["outputs_limit"] = "off";
  }
  row.created_at = unix_now_s();
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
  if (live->done || s.done || s.current != -1) return;
  // One placement at a time per job, so that replicas land on distinct providers.
  for (const auto& other : live->slots) {
    if (other->current == -2) {
      s.waiting = true;
      return;
    }
  }
  nlohmann::json needs = live->row.spec.value("needs", nlohmann::json::object());
  // Replicas run on distinct providers, always; the ones that failed this
  // replica are left out while anyone else can take it.
  std::set<std::string> exclude;
  for (const auto& other : live->slots) {
    if (other.get() == &s) continue;
    int i = other->current >= 0 ? other->current : other->answer;
    if (i >= 0) exclude.insert(live->row.attempts[static_cast<size_t>(i)].provider_id);
  }
  bool excluding_failed = !s.allow_failed && !s.failed_on.empty();
  if (excluding_failed) exclude.insert(s.failed_on.begin(), s.failed_on.end());
  if (!exclude.empty()) needs["exclude"] = exclude;
  // A placeholder keeps a sibling placed at the same moment off the provider
  // this one is being offered (the lease answers first).
  s.current = -2;
  mesh_.lease_for(needs, [this, alive = alive_, live, r, excluding_failed](Result<nlohmann::json> got) {
    if (!*alive) return;
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    sl.current = -1;
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
      if (got)
        mesh_.release_lease((*got)["provider"].value("node_id", ""), got->value("lease_id", uint64_t{0}),
                            [](Result<nlohmann::json>) {});
      return;
    }
    if (!got && excluding_failed) {
      spdlog::info("mesh job {}: no other provider can take it ({}); trying the previous ones too",
                   live->row.id.substr(0, 12), got.error().message());
      sl.allow_failed = true;
      return place(live, r);
    }
    sl.allow_failed = false;
    if (!got) {
      bool never_ran = std::none_of(live->row.attempts.begin(), live->row.attempts.end(),
                                    [&](const MeshAttempt& a) { return a.replica == r; });
      if (never_ran && live->replicas() == 1) {
        return finish(live, "failed",
                      {{"message", got.error().message()},
                       {"exit_code", nullptr},
                       {"code", error_code_name(got.error().code())},
                       {"reason", "unplaced"}});
      }
      if (++sl.placement_failures > settings_.max_requeues) {
        // No provider would take it any more: not the job's fault, and the
        // result says so (an array puts the task back, mesh_arrays.h).
        if (live->replicas() == 1) {
          return finish(live, "failed",
                        {{"message", "could not place it: " + got.error().message()},
                         {"exit_code", nullptr},
                         {"reason", "unplaced"}});
        }
        return slot_gave_up(live, r, "could not place it: " + got.error().message());
      }
      spdlog::info("mesh job {}: cannot place replica {} now ({}); trying again in {} ms", live->row.id.substr(0, 12),
                   r, got.error().message(), settings_.provider_timeout.count());
      sl.timer.expires_after(settings_.provider_timeout);
      sl.timer.async_wait([this, alive, live, r](boost::system::error_code ec) {
        if (!ec && *alive) place(live, r);
      });
      return;
    }
    sl.placement_failures = 0;
    submit(live, r, *got);
  });
}

void MeshJobs::submit(const std::shared_ptr<Live>& live, int r, const nlohmann::json& lease) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  std::string provider = lease["provider"].value("node_id", "");
  MeshAttempt a;
  a.attempt = static_cast<int>(live->row.attempts.size()) + 1;
  a.replica = r;
  a.provider_id = provider;
  a.provider_name = lease["provider"].value("name", provider);
  a.state = "uploading";
  a.started_at = unix_now_s();
  live->row.attempts.push_back(a);
  s.current = static_cast<int>(live->row.attempts.size()) - 1;
  s.lease_id = lease.value("lease_id", uint64_t{0});
  spdlog::info("mesh job {}: attempt {} (replica {}) on {}", live->row.id.substr(0, 12), a.attempt, r, a.provider_name);
  // An attempt that never started: the lease goes back, the job goes elsewhere.
  auto not_started = [this, live, r, provider, n = a.attempt](const Error& e) {
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    mesh_.release_lease(provider, sl.lease_id, [](Result<nlohmann::json>) {});
    MeshAttempt* cur = live->attempt(sl);
    if (cur == nullptr || cur->attempt != n) return;
    cur->state = "not started";
    cur->why = e.message();
    cur->ended_at = unix_now_s();
    sl.failed_on.insert(provider);
    spdlog::info("mesh job {}: attempt {} did not start: {}", live->row.id.substr(0, 12), n, e.message());
    requeue(live, r);
  };
  auto target = link_.target(provider);
  if (!target) return not_started(target.error());
  // Only a lone replica resumes from a checkpoint: replicas stay independent.
  bool checkpointed = live->replicas() == 1;
  save(live, [this, alive = alive_, live, r, t = *target, n = a.attempt, not_started, checkpointed] {
    std::string source = live->row.spec.value("dir", "");
    asio::post(pool_, [this, alive, live, r, t, n, not_started, source, checkpointed] {
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
        remote_.submit(
            t, live->row.spec["job"], staged->dir, transfer_id,
            [this, alive, live, r, t, n, not_started, temporary = staged->temporary](Result<nlohmann::json> got) {
              if (!temporary.empty()) {
                asio::post(pool_, [temporary] {
                  std::error_code ec;
                  fs::remove_all(temporary, ec);
                });
              }
              if (!*alive) return;
              if (!got) return not_started(got.error());
              std::string job_id = got->value("job_id", "");
              if (live->done) {  // stopped while it was being submitted
                remote_.call_job(job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
                return;
              }
              Slot& s2 = *live->slots[static_cast<size_t>(r)];
              MeshAttempt* cur = live->attempt(s2);
              if (cur == nullptr || cur->attempt != n) return;
              cur->job_id = job_id;
              cur->state = "running";
              mesh_.bind_lease(t.node_id, s2.lease_id, job_id, [id = live->row.id](Result<nlohmann::json> b) {
                if (!b)
                  spdlog::warn("mesh job {}: binding the lease failed: {}", id.substr(0, 12), b.error().message());
              });
              if (live->stopping) {
                remote_.call_job(job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
              }
              save(live, [this, live, r] { watch(live, r); });
            });
      });
    });
  });
}

void MeshJobs::watch(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  s.last_answer = s.last_checkpoint = std::chrono::steady_clock::now();
  tick(live, r);
}

void MeshJobs::tick(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (live->done || a == nullptr || a->state != "running") return;
  auto now = std::chrono::steady_clock::now();
  if (now - s.last_answer > settings_.provider_timeout) return lost(live, r);
  int n = a->attempt;
  if (s.inspecting != n) {
    s.inspecting = n;
    remote_.call_job(a->job_id, "run.inspect", nlohmann::json::object(), true,
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
                       sl.last_answer = std::chrono::steady_clock::now();
                       if (mesh_jobs_finished_state(got->value("state", ""))) attempt_ended(live, r, *got);
                     });
  }
  if (live->replicas() == 1 && now - s.last_checkpoint >= settings_.checkpoint_interval && s.fetching != n) {
    sync_checkpoint(live, r);
  }
  auto period = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(settings_.provider_timeout / 4),
                           kMinTick, kMaxTick);
  s.timer.expires_after(period);
  s.timer.async_wait([this, alive = alive_, live, r](boost::system::error_code ec) {
    if (!ec && *alive) tick(live, r);
  });
}

void MeshJobs::sync_checkpoint(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (a == nullptr) return;
  int n = a->attempt;
  s.fetching = n;
  nlohmann::json body = {{"job_id", a->job_id}, {"dir", job_dir(live->row.id)}, {"paths", {"checkpoint"}}};
  fetch_.fetch_into(body, [alive = alive_, live, r, n](Result<nlohmann::json> got) {
    if (!*alive) return;
    Slot& sl = *live->slots[static_cast<size_t>(r)];
    if (sl.fetching == n) sl.fetching = 0;
    sl.last_checkpoint = std::chrono::steady_clock::now();
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
  a->state = v.value("state", "failed");
  if (v.contains("exit_code") && v["exit_code"].is_number_integer()) a->exit_code = v["exit_code"].get<int>();
  a->why = v.value("message", "");
  if (a->why.empty() && a->exit_code) a->why = "exited with " + std::to_string(*a->exit_code);
  a->ended_at = unix_now_s();
  if (live->stopping) return finish(live, "stopped", result_of(*a));
  bool answered = a->state == "exited" && (live->replicas() > 1 || a->exit_code == 0);
  if (answered) {
    if (live->replicas() == 1) return finish(live, "succeeded", result_of(*a));
    s.done = true;
    s.answer = s.current;
    s.current = -1;
    spdlog::info("mesh job {}: replica {} answered on {}", live->row.id.substr(0, 12), r, a->provider_name);
    return save(live, [this, live] { maybe_verify(live); });
  }
  uint64_t allowed = live->row.spec.value("retries", uint64_t{0});
  if (count_attempts(live->row, r).retries <= allowed) {
    spdlog::info("mesh job {}: attempt {} on {} ended ({}); retrying elsewhere", live->row.id.substr(0, 12), a->attempt,
                 a->provider_name, a->why);
    s.failed_on.insert(a->provider_id);
    s.current = -1;
    return save(live, [this, live, r] { place(live, r); });
  }
  if (live->replicas() == 1) return finish(live, "failed", result_of(*a));
  slot_gave_up(live, r, a->why);
}

void MeshJobs::lost(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  MeshAttempt* a = live->attempt(s);
  if (a == nullptr) return;
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(settings_.provider_timeout).count();
  a->state = "lost";
  a->why = a->provider_name + " stopped answering for " + std::to_string(secs) + " s";
  a->ended_at = unix_now_s();
  s.failed_on.insert(a->provider_id);
  spdlog::warn("mesh job {}: {}; requeueing", live->row.id.substr(0, 12), a->why);
  // Should it come back, the job there is stopped (best effort: it may never answer).
  remote_.call_job(a->job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
  requeue(live, r);
}

void MeshJobs::requeue(const std::shared_ptr<Live>& live, int r) {
  Slot& s = *live->slots[static_cast<size_t>(r)];
  s.current = -1;
  uint32_t requeues = count_attempts(live->row, r).requeues;
  if (requeues > settings_.max_requeues) {
    std::string last;
    for (const auto& a : live->row.attempts) {
      if (a.replica == r) last = a.why;
    }
    std::string why = "gave up after " + std::to_string(requeues) + " providers lost or refused it (" + last +
                      "); mesh.max_requeues is " + std::to_string(settings_.max_requeues);
    if (live->replicas() == 1) return finish(live, "failed", {{"message", why}, {"exit_code", nullptr}});
    return slot_gave_up(live, r, why);
  }
  save(live, [this, live, r] { place(live, r); });
}

void MeshJobs::slot_gave_up(const std::shared_ptr<Live>& live, int r, const std::string& why) {
  if (live->replicas() == 1) return finish(live, "failed", {{"message", why}, {"exit_code", nullptr}});
  Slot& s = *live->slots[static_cast<size_t>(r)];
  s.done = true;
  s.current = -1;
  spdlog::info("mesh job {}: replica {} has no answer: {}", live->row.id.substr(0, 12), r, why);
  save(live, [this, live] { maybe_verify(live); });
}

void MeshJobs::finish(const std::shared_ptr<Live>& live, const std::string& state, nlohmann::json result) {
  if (live->done) return;
  live->done = true;
  for (auto& s : live->slots) s->timer.cancel();
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
