#include "mesh/jobs/mesh_arrays.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <spdlog/spdlog.h>

#include "api/request_parse.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "crypto/node_id.h"
#include "crypto/random_id.h"
#include "jobs/protocol/job_request.h"
#include "transfer/tree_pack.h"

namespace yonder::mesh {
namespace asio = boost::asio;
namespace fs = std::filesystem;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr uint32_t kMeshArraysMaxRetries = 100;
constexpr size_t kMaxFailedShown = 100;
constexpr std::chrono::seconds kUnplacedBackoff{1};
constexpr uint32_t kMaxFetchFailures = 3;


Error bad(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, why); }

// The newest attempt of a mesh job's view.
const nlohmann::json* last_attempt(const nlohmann::json& view) {
  if (!view.is_object() || !view.contains("attempts")) return nullptr;
  const nlohmann::json& a = view["attempts"];
  if (!a.is_array() || a.empty() || !a.back().is_object()) return nullptr;
  return &a.back();
}

}  // namespace

void MeshJobsRunner::create_job(MeshJobSpec spec, std::function<void(Result<nlohmann::json>)> done) {
  jobs_.create(std::move(spec), std::move(done));
}

void MeshJobsRunner::inspect_job(const MeshJobId& id, std::function<void(Result<nlohmann::json>)> done) {
  jobs_.inspect(id.value(), std::move(done));
}

void MeshJobsRunner::stop_job(const MeshJobId& id) {
  jobs_.stop_job(id.value(), [id](Result<nlohmann::json> r) {
    if (!r) spdlog::info("array: stopping mesh job {}: {}", id.value().substr(0, 12), r.error().message());
  });
}

struct MeshArrays::Live {
  MeshArrayRow row;
  std::optional<mesh::ArrayRun> run;
  // The job every task runs (row.spec's "job"), read once rather than at
  // each launch; nullopt with the reason when the stored one cannot be read.
  std::optional<jobs::protocol::JobRequest> job;
  std::string job_unreadable;
  // Running attempts: attempt id -> mesh job id ("" while it is created).
  std::map<uint64_t, MeshJobId> jobs;
  std::map<uint32_t, nlohmann::json> failed;   // task -> {"mesh_job_id", "job_id", "why"} of its last try
  std::map<std::string, std::string> names;    // provider id -> name, as the jobs' views say
  std::set<uint32_t> fetching;                 // tasks whose outputs are on their way home
  std::unique_ptr<LoopTimers::Timer> timer;  // the next tick
  std::map<uint32_t, std::unique_ptr<LoopTimers::Timer>> second_looks;  // per task: its outputs fetched again
  bool ticking = false, waiting = false;
  bool saving = false, dirty = false;
  mesh::UnixMs started_ms = 0, unplaced_until = 0;
  uint64_t fetch_errors = 0;
  std::map<uint32_t, uint32_t> fetch_failures;  // per task
  // Providers a task failed on are avoided while others can take it: a
  // launch that found nobody else goes again without avoiding them.
  std::set<uint32_t> relaxed;
  std::set<uint64_t> avoiding;  // attempts launched with an exclude list
  std::string error;  // why the array stopped by itself ("" when it did not)
};

MeshArrays::MeshArrays(asio::io_context& io, asio::any_io_executor blocking, LoopTimers& timers,
                       MeshTaskRunner& runner, AttemptServices& files, std::unique_ptr<MeshArrayStore> store,
                       std::chrono::milliseconds tick)
    : io_(io),
      blocking_(std::move(blocking)),
      timers_(timers),
      runner_(runner),
      files_(files),
      store_(std::move(store)),
      tick_(tick) {}

MeshArrays::~MeshArrays() {
  *alive_ = false;
  for (auto& [id, l] : live_) {
    l->timer.reset();
    l->second_looks.clear();
  }
}

Status MeshArrays::start() {
  asio::post(blocking_, [this, alive = alive_] {
    auto rows = store_->list(true);
    asio::post(io_, [this, alive, rows = std::move(rows)]() mutable {
      if (!*alive) return;
      if (!rows) {
        spdlog::error("array jobs: cannot read the stored arrays: {}", rows.error().to_string());
        return;
      }
      for (auto& r : *rows) resume(std::move(r));
    });
  });
  return ok_status();
}

Result<std::shared_ptr<MeshArrays::Live>> MeshArrays::restore(MeshArrayRow row) {
  auto run = mesh::ArrayRun::from_json(row.run);
  if (!run) return std::move(run).error();
  auto live = std::make_shared<Live>();
  live->run = std::move(*run);
  live->row = std::move(row);
  if (auto job = jobs::protocol::parse_job_request(live->row.spec.value("job", nlohmann::json::object()))) {
    live->job = std::move(*job);
  } else {
    live->job_unreadable = job.error().to_string();
  }
  live->started_ms = unix_ms();
  if (!live->row.tasks.is_object()) live->row.tasks = nlohmann::json::object();
  const nlohmann::json& notes = live->row.tasks;
  if (notes.contains("error") && notes["error"].is_string()) live->error = notes["error"];
  if (notes.contains("failed") && notes["failed"].is_object()) {
    for (const auto& [k, v] : notes["failed"].items()) {
      live->failed[static_cast<uint32_t>(std::strtoul(k.c_str(), nullptr, 10))] = v;
    }
  }
  return live;
}

void MeshArrays::resume(MeshArrayRow row) {
  std::string id = row.id;
  auto run = restore(std::move(row));
  if (!run) {
    spdlog::error("array {}: {}", id.substr(0, 12), run.error().to_string());
    return;
  }
  auto live = std::move(*run);
  // Attempts that were running: watched again under new attempt ids.
  for (const auto& [k, v] : live->row.tasks.items()) {
    if (k == "failed" || k == "error") continue;
    if (!v.is_object() || !v["task"].is_number_unsigned() || !v["mesh_job_id"].is_string()) continue;
    auto attempt = live->run->adopt(v["task"].get<uint32_t>(), unix_ms());
    if (attempt) live->jobs[*attempt] = MeshJobId(v["mesh_job_id"].get<std::string>());
  }
  auto c = live->run->counts();
  spdlog::info("array {}: resumed ({} done, {} failed, {} watched again, {} to run)", live->row.id.substr(0, 12), c.done,
               c.failed, live->jobs.size(), c.pending);
  live_[live->row.id] = live;
  pump(live);
  schedule(live);
}

void MeshArrays::add_routes(api::Router& router) {
  router.add("POST", "/v1/mesh/arrays", [this](const Request& req, Reply reply) { create(req, std::move(reply)); });
  router.add("POST", "/v1/mesh/arrays/retry",
             [this](const Request& req, Reply reply) { control(req, std::move(reply), false); });
  router.add("POST", "/v1/mesh/arrays/cancel",
             [this](const Request& req, Reply reply) { control(req, std::move(reply), true); });
  router.add("GET", "/v1/mesh/arrays/inspect", [this](const Request& req, Reply reply) {
    std::string id = api::parse_query(req.query)["id"];
    for (const auto& [key, l] : live_) {
      if (!id.empty() && key.compare(0, id.size(), id) == 0) return reply(Response::json(200, status(*l)));
    }
    asio::post(blocking_, [this, alive = alive_, id, reply] {
      auto row = store_->find(id);
      asio::post(io_, [this, alive, row = std::move(row), reply]() mutable {
        if (!*alive) return;
        if (!row) return reply(Response::error(row.error()));
        auto l = restore(std::move(*row));
        if (!l) return reply(Response::error(l.error()));
        reply(Response::json(200, status(**l)));
      });
    });
  });
  router.add("GET", "/v1/mesh/arrays", [this](const Request& req, Reply reply) {
    bool all = api::parse_query(req.query)["all"] == "1";
    asio::post(blocking_, [this, alive = alive_, all, reply] {
      auto rows = store_->list(!all);
      asio::post(io_, [this, alive, rows = std::move(rows), reply] {
        if (!*alive) return;
        if (!rows) return reply(Response::error(rows.error()));
        nlohmann::json arrays = nlohmann::json::array();
        for (const auto& r : *rows) {
          auto l = live_.find(r.id);
          if (l != live_.end()) {
            arrays.push_back(status(*l->second));
            continue;
          }
          auto run = mesh::ArrayRun::from_json(r.run);
          nlohmann::json j = {{"array_id", r.id}, {"state", r.state}, {"tasks", r.spec.value("tasks", 0)},
                              {"created_at", r.created_at}};
          if (run) {
            auto c = run->counts();
            j["counts"] = {{"done", c.done}, {"failed", c.failed}, {"pending", c.pending}, {"running", 0}};
          }
          arrays.push_back(std::move(j));
        }
        reply(Response::json(200, {{"arrays", arrays}}));
      });
    });
  });
}

void MeshArrays::create(const Request& req, Reply reply) {
  auto b = nlohmann::json::parse(req.body, nullptr, false);
  if (!b.is_object() || !b.contains("job") || !b["job"].is_object()) return reply(Response::error(bad("the body needs \"job\"")));
  auto request = jobs::protocol::parse_job_request(b["job"]);  // a typo fails now, not at every task
  if (!request) return reply(Response::error(request.error()));
  mesh::ArraySpec spec;
  if (b.contains("array")) {
    if (!b["array"].is_string()) return reply(Response::error(bad("\"array\" is a range like \"0-99%4\"")));
    if (auto st = mesh::parse_array_range(b["array"].get<std::string>(), spec); !st)
      return reply(Response::error(st.error()));
  }
  nlohmann::json params = nlohmann::json::array();
  if (b.contains("params")) {
    if (!b["params"].is_array() || b["params"].empty() || b["params"].size() > mesh::kMaxArrayTasks) {
      return reply(Response::error(bad("\"params\" must be a list of 1 to 1,000,000 lines")));
    }
    for (const auto& p : b["params"]) {
      if (!p.is_string() || p.get<std::string>().size() > kMaxParamBytes ||
          p.get<std::string>().find('\0') != std::string::npos) {
        return reply(Response::error(bad("each line of the array file must be text of at most 32 KiB")));
      }
    }
    params = b["params"];
    if (spec.tasks == 0) spec.tasks = static_cast<uint32_t>(params.size());
    if (spec.tasks != params.size()) {
      return reply(Response::error(bad("--array names " + std::to_string(spec.tasks) + " tasks but the array file has " +
                                       std::to_string(params.size()) + " lines; give one of them")));
    }
  }
  if (spec.tasks == 0) return reply(Response::error(bad("give --array 0-N[%LIMIT] or --array-file FILE")));
  if (b.contains("limit")) {
    if (!b["limit"].is_number_unsigned() || b["limit"].get<uint64_t>() > mesh::kMaxArrayTasks) {
      return reply(Response::error(bad("\"limit\" must be a whole number")));
    }
    spec.limit = b["limit"].get<uint32_t>();
  }
  if (spec.limit == 0) spec.limit = kDefaultConcurrency;
  if (b.contains("retries")) {
    if (!b["retries"].is_number_unsigned() || b["retries"].get<uint64_t>() > kMeshArraysMaxRetries) {
      return reply(Response::error(bad("--retries must be 0 to 100")));
    }
    spec.retries = b["retries"].get<uint32_t>();
  }
  if (!b.contains("out") || !b["out"].is_string() || b["out"].get<std::string>().empty() ||
      b["out"].get<std::string>().front() != '/') {
    return reply(Response::error(bad("\"out\" must be an absolute folder: the task outputs go to OUT/out/<index>/")));
  }
  std::string dir = b.value("dir", "");
  if (!dir.empty() && dir.front() != '/') return reply(Response::error(bad("\"dir\" must be an absolute path")));
  nlohmann::json needs = b.value("needs", nlohmann::json::object());
  if (!needs.is_object()) return reply(Response::error(bad("\"needs\" must be an object")));
  uint32_t replicas = 1;
  if (b.contains("replicas")) {
    if (!b["replicas"].is_number_unsigned() || b["replicas"].get<uint64_t>() < 1 || b["replicas"].get<uint64_t>() > 9) {
      return reply(Response::error(bad("--replicas must be 1 to 9")));
    }
    replicas = b["replicas"].get<uint32_t>();
  }
  if (b.contains("validator") && (!b["validator"].is_string() || b["validator"].get<std::string>().size() > 4096)) {
    return reply(Response::error(bad("\"validator\" must be a command line")));
  }

  auto live = std::make_shared<Live>();
  live->row.id = random_hex_id(16);
  live->row.state = "running";
  live->job = *request;
  live->row.spec = {{"job", request->to_json()}, {"dir", dir},           {"out", b["out"]},
                    {"needs", needs},  {"tasks", spec.tasks},  {"limit", spec.limit},
                    {"retries", spec.retries}};
  if (!params.empty()) live->row.spec["params"] = std::move(params);
  if (replicas > 1) live->row.spec["replicas"] = replicas;
  if (b.contains("validator")) live->row.spec["validator"] = b["validator"];
  if (b.contains("outputs_limit")) {
    if (b["outputs_limit"] != "off") return reply(Response::error(bad("\"outputs_limit\" can only be \"off\"")));
    live->row.spec["outputs_limit"] = "off";
  }
  live->row.created_at = unix_seconds(timers_.now());
  live->run.emplace(spec);
  live->row.run = live->run->to_json();
  live->row.tasks = nlohmann::json::object();
  live->started_ms = unix_ms();
  asio::post(blocking_, [this, alive = alive_, live, reply] {
    std::error_code ec;
    std::string out = live->row.spec["out"].get<std::string>() + "/out";
    fs::create_directories(out, ec);
    // Marked, so that the input folder's uploads leave it out (transfer/tree_pack.h).
    if (!ec) std::ofstream(out + "/" + transfer::kOutputsMarker) << "outputs of yonder array " << live->row.id << "\n";
    Status st = ec ? Status(make_error(ErrorCode::kFailedPrecondition,
                                       "cannot create " + live->row.spec["out"].get<std::string>() + "/out: " + ec.message()))
                   : store_->put(live->row);
    asio::post(io_, [this, alive, live, reply, st = std::move(st)] {
      if (!*alive) return;
      if (!st) return reply(Response::error(st.error()));
      live_[live->row.id] = live;
      spdlog::info("array {}: accepted ({} tasks, at most {} at once)", live->row.id.substr(0, 12), live->run->spec().tasks,
                   live->run->spec().limit);
      reply(Response::json(200, status(*live)));
      pump(live);
      schedule(live);
    });
  });
}

void MeshArrays::control(const Request& req, Reply reply, bool cancel) {
  auto b = nlohmann::json::parse(req.body, nullptr, false);
  if (!b.is_object() || !b["array_id"].is_string()) return reply(Response::error(bad("the body needs \"array_id\"")));
  std::string id = b["array_id"];
  std::shared_ptr<Live> live;
  for (const auto& [key, l] : live_) {
    if (!id.empty() && key.compare(0, id.size(), id) == 0) live = l;
  }
  auto act = [this, cancel, reply](const std::shared_ptr<Live>& l) {
    if (cancel) {
      l->run->cancel();
      for (const auto& [attempt, job] : l->jobs) {
        if (!job.value().empty()) runner_.stop_job(job);
      }
      spdlog::info("array {}: cancelled", l->row.id.substr(0, 12));
    } else {
      uint32_t n = l->run->retry_failed();
      for (uint32_t t = 0; t < l->run->spec().tasks; ++t) {
        if (l->run->state(t) == mesh::TaskState::kPending) l->failed.erase(t);
      }
      l->row.state = "running";
      spdlog::info("array {}: {} failed task(s) run again", l->row.id.substr(0, 12), n);
    }
    live_[l->row.id] = l;
    save(l);
    reply(Response::json(200, status(*l)));
    pump(l);
    schedule(l);
    maybe_finish(l);
  };
  if (live) return act(live);
  if (cancel) {
    return reply(Response::error(make_error(ErrorCode::kFailedPrecondition,
                                            "array " + id + " is not running here (finished, or not ours): nothing to cancel")));
  }
  // retry on a finished array: load it again.
  asio::post(blocking_, [this, alive = alive_, id, act, reply] {
    auto row = store_->find(id);
    asio::post(io_, [this, alive, row = std::move(row), act, reply]() mutable {
      if (!*alive) return;
      if (!row) return reply(Response::error(row.error()));
      auto l = restore(std::move(*row));
      if (!l) return reply(Response::error(l.error()));
      act(*l);
    });
  });
}

void MeshArrays::pump(const std::shared_ptr<Live>& live) {
  if (!*alive_ || live->row.finished() || live->run->cancelled()) return;
  if (unix_ms() < live->unplaced_until) return;
  auto launches = live->run->next(unix_ms(), live->run->spec().limit);
  for (const auto& l : launches) launch(live, l);
}

void MeshArrays::launch(const std::shared_ptr<Live>& live, const mesh::ArrayLaunch& l) {
  const nlohmann::json& spec = live->row.spec;
  if (!live->job) {
    spdlog::warn("mesh array {}: its stored job cannot be read: {}", live->row.id.substr(0, 12), live->job_unreadable);
    return;
  }
  MeshJobSpec task;
  task.job = *live->job;
  auto& env = task.job.env;
  env["YONDER_ARRAY_INDEX"] = std::to_string(l.task);
  env["YONDER_ARRAY_TASKS"] = std::to_string(live->run->spec().tasks);
  env["YONDER_ARRAY_ID"] = live->row.id;
  if (spec.contains("params") && spec["params"].is_array() && l.task < spec["params"].size() &&
      spec["params"][l.task].is_string()) {
    env["YONDER_ARRAY_PARAM"] = spec["params"][l.task].get<std::string>();
  }
  nlohmann::json needs = spec.value("needs", nlohmann::json::object());
  bool avoid = !l.avoid.empty() && live->relaxed.erase(l.task) == 0;
  if (avoid) {
    live->avoiding.insert(l.attempt);
    nlohmann::json exclude = nlohmann::json::array();
    for (const auto& k : l.avoid) exclude.push_back(NodeId(k).to_string());
    needs["exclude"] = exclude;
  }
  task.needs = std::move(needs);
  task.retries = 0;
  // --replicas applies per task: the mesh job runs it on K providers and a
  // quorum of their outputs decides.
  if (spec.contains("replicas") && spec["replicas"].is_number_unsigned()) task.replicas = spec["replicas"].get<uint64_t>();
  if (spec.contains("validator") && spec["validator"].is_string()) task.validator = spec["validator"].get<std::string>();
  task.outputs_unlimited = spec.value("outputs_limit", "") == "off";  // the replicas' fetches
  task.dir = spec.value("dir", "");
  live->jobs[l.attempt] = MeshJobId();
  runner_.create_job(std::move(task), [this, alive = alive_, live, l](Result<nlohmann::json> r) {
    if (!*alive) return;
    if (!r || !(*r)["mesh_job_id"].is_string()) {
      live->jobs.erase(l.attempt);
      live->avoiding.erase(l.attempt);
      live->run->unplaced(l.attempt);
      // A request no provider will ever take (a bad job): the array stops
      // with the reason rather than asking again forever.
      if (!r && (r.error().code() == ErrorCode::kInvalidArgument || r.error().code() == ErrorCode::kPermissionDenied)) {
        if (live->error.empty()) {
          live->error = r.error().message();
          spdlog::warn("array {}: cannot run its tasks: {}", live->row.id.substr(0, 12), live->error);
          live->run->cancel();
          for (const auto& [running, mesh_job] : live->jobs) {
            if (!mesh_job.value().empty()) runner_.stop_job(mesh_job);
          }
          save(live);
          maybe_finish(live);
        }
        return;
      }
      // Nothing could be placed (the mesh is full or offline): the task goes
      // back and launches pause for a moment.
      live->unplaced_until = unix_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(kUnplacedBackoff).count();
      spdlog::info("array {}: task {} could not start: {}", live->row.id.substr(0, 12), l.task,
                   r ? std::string("no mesh job id") : r.error().message());
      return;
    }
    live->jobs[l.attempt] = MeshJobId((*r)["mesh_job_id"].get<std::string>());
    save(live);
  });
}

void MeshArrays::schedule(const std::shared_ptr<Live>& live) {
  if (live->ticking || live->row.finished()) return;
  live->ticking = true;
  live->timer = timers_.after(tick_, [this, alive = alive_, live] {
    if (!*alive) return;
    live->ticking = false;
    tick(live);
  });
}

void MeshArrays::tick(const std::shared_ptr<Live>& live) {
  if (live->row.finished()) return;
  if (live->waiting) return schedule(live);
  // Ask every running attempt's mesh job how it is; act once all answered.
  std::vector<std::pair<uint64_t, MeshJobId>> asks;
  for (const auto& [attempt, job] : live->jobs) {
    if (!job.value().empty()) asks.emplace_back(attempt, job);
  }
  if (asks.empty()) {
    pump(live);
    maybe_finish(live);
    return schedule(live);
  }
  live->waiting = true;
  auto left = std::make_shared<size_t>(asks.size());
  auto views = std::make_shared<std::vector<std::pair<uint64_t, nlohmann::json>>>();
  for (const auto& [attempt, job] : asks) {
    runner_.inspect_job(job, [this, alive = alive_, live, attempt = attempt, left, views](Result<nlohmann::json> r) {
      if (!*alive) return;
      if (r) views->emplace_back(attempt, std::move(*r));
      if (--*left > 0) return;
      live->waiting = false;
      std::sort(views->begin(), views->end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [a, v] : *views) observe(live, a, v);
      for (uint64_t extra : live->run->redundant_attempts()) {
        auto j = live->jobs.find(extra);
        if (j != live->jobs.end() && !j->second.value().empty()) runner_.stop_job(j->second);
      }
      pump(live);
      maybe_finish(live);
      schedule(live);
    });
  }
}

void MeshArrays::observe(const std::shared_ptr<Live>& live, uint64_t attempt, const nlohmann::json& view) {
  if (!live->jobs.count(attempt)) return;
  const nlohmann::json* last = last_attempt(view);
  if (last != nullptr && (*last)["provider_id"].is_string()) {
    std::string pid = (*last)["provider_id"];
    if (auto id = NodeId::parse(pid)) {
      auto cur = live->run->provider_of(attempt);
      if (!cur || *cur != id->public_key()) (void)live->run->started(attempt, id->public_key(), unix_ms());
      if ((*last)["provider_name"].is_string()) live->names[pid] = (*last)["provider_name"];
    }
  }
  std::string state = view.value("state", "running");
  if (state == "running") return;
  auto task = live->run->task_of(attempt);
  bool avoided = live->avoiding.erase(attempt) > 0;
  bool unplaced = view.contains("result") && view["result"].is_object() &&
                  view["result"].value("reason", "") == "unplaced";
  if (state == "failed" && (last == nullptr || unplaced)) {
    // It never ran, or its provider died and no other would take it then
    // (all busy): no provider would lease it. Not the task's fault: it
    // goes again, without avoiding anyone if it avoided someone (nobody
    // else could take it), else after a pause (all busy).
    live->jobs.erase(attempt);
    live->run->unplaced(attempt);
    if (avoided && task) {
      live->relaxed.insert(*task);
    } else {
      live->unplaced_until = unix_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(kUnplacedBackoff).count();
    }
    return;
  }
  mesh::AttemptOutcome outcome = mesh::AttemptOutcome::kFailed;
  if (state == "succeeded") {
    outcome = mesh::AttemptOutcome::kSucceeded;
  } else if (state == "stopped") {
    outcome = mesh::AttemptOutcome::kStopped;
  } else if (last != nullptr && (*last).value("state", "") == "lost") {
    outcome = mesh::AttemptOutcome::kLost;
  }
  // The attempt whose outputs are the answer: the one the mesh job names
  // (with replicas, the quorum's), else its last.
  std::string job_id = last != nullptr ? (*last).value("job_id", "") : "";
  if (view.contains("result") && view["result"].is_object() && view["result"].contains("job_id") &&
      view["result"]["job_id"].is_string() && !view["result"]["job_id"].get<std::string>().empty()) {
    job_id = view["result"]["job_id"].get<std::string>();
  }
  std::string mesh_job = live->jobs[attempt].value();
  live->jobs.erase(attempt);
  auto verdict = live->run->finished(attempt, outcome, unix_ms(), mesh_job);
  if (!task) return;
  switch (verdict) {
    case mesh::ArrayRun::Verdict::kResult:
      live->failed.erase(*task);
      bring_home(live, *task, job_id);
      break;
    case mesh::ArrayRun::Verdict::kFailed: {
      nlohmann::json why = view.contains("result") && view["result"].is_object() ? view["result"] : nlohmann::json::object();
      live->failed[*task] = {{"mesh_job_id", mesh_job}, {"job_id", job_id},
                             {"why", why.value("message", state)}, {"exit_code", why.contains("exit_code") ? why["exit_code"] : nlohmann::json()}};
      spdlog::info("array {}: task {} failed for good ({})", live->row.id.substr(0, 12), *task, state);
      save(live);
      break;
    }
    case mesh::ArrayRun::Verdict::kRetry:
      spdlog::info("array {}: task {} {} on {}; tried again elsewhere", live->row.id.substr(0, 12), *task,
                   outcome == mesh::AttemptOutcome::kLost ? "was lost" : "failed",
                   last != nullptr ? (*last).value("provider_name", "?") : "?");
      save(live);
      break;
    case mesh::ArrayRun::Verdict::kDiscarded:
    case mesh::ArrayRun::Verdict::kIgnored:
      save(live);
      break;
  }
}

// The task's outputs come home into OUT/out/<index>/: what the job created
// or changed, judged against the input folder. The task counts as done in
// the stored state only once they are there.
void MeshArrays::bring_home(const std::shared_ptr<Live>& live, uint32_t task, const std::string& job_id,
                            bool second_look) {
  if (job_id.empty()) {
    // A result that names no job has no outputs to bring: never "done"
    // without them, so the task runs again.
    outputs_lost(live, task, "its mesh job names no provider job");
    save(live);
    return maybe_finish(live);
  }
  std::string dest = live->row.spec["out"].get<std::string>() + "/out/" + std::to_string(task);
  live->fetching.insert(task);
  asio::post(blocking_, [this, alive = alive_, live, task, job_id, dest, second_look] {
    std::error_code ec;
    fs::create_directories(dest, ec);
    asio::post(io_, [this, alive, live, task, job_id, dest, second_look] {
      if (!*alive) return;
      nlohmann::json body = {{"job_id", job_id}, {"dir", dest}};
      if (!live->row.spec.value("dir", "").empty()) body["base"] = live->row.spec["dir"];
      // Past outputs.max_files / max_mib only with the user's word (`run
      // --mesh --array ... --no-outputs-limit`); the free space always bounds it.
      if (live->row.spec.value("outputs_limit", "") == "off") body["outputs_limit"] = "off";
      files_.fetch_into(body, [this, alive, live, task, job_id, second_look](Result<nlohmann::json> r) {
        if (!*alive) return;
        bool nothing = r && r->value("files", nlohmann::json::array()).empty();
        if (nothing && !second_look) {
          // Nothing came. A task that made no files is rare, and a provider
          // can answer from a workspace it has not finished putting away
          // (an ended job's image still being unmounted): look once more,
          // 2 s later.
          live->second_looks[task] = timers_.after(std::chrono::seconds(2), [this, alive, live, task, job_id] {
            if (!*alive) return;
            bring_home(live, task, job_id, true);
            live->second_looks.erase(task);
          });
          return;
        }
        live->fetching.erase(task);
        if (nothing) spdlog::warn("array {}: task {} left no new or changed files", live->row.id.substr(0, 12), task);
        if (!r) outputs_lost(live, task, r.error().message());
        save(live);
        maybe_finish(live);
      });
    });
  });
}

// A result nobody can use: the task runs again (a few times).
void MeshArrays::outputs_lost(const std::shared_ptr<Live>& live, uint32_t task, const std::string& why) {
  ++live->fetch_errors;
  bool again = ++live->fetch_failures[task] <= kMaxFetchFailures && live->run->reopen(task).ok();
  spdlog::warn("array {}: the outputs of task {} could not come home ({}){}", live->row.id.substr(0, 12), task, why,
               again ? "; it runs again" : "");
  if (again) pump(live);
}

void MeshArrays::maybe_finish(const std::shared_ptr<Live>& live) {
  if (live->row.finished() || !live->run->complete() || !live->fetching.empty()) return;
  auto c = live->run->counts();
  live->row.state = !live->error.empty() ? "failed" : live->run->cancelled() ? "cancelled" : c.failed > 0 ? "failed" : "done";
  spdlog::info("array {}: {} ({} done, {} failed)", live->row.id.substr(0, 12), live->row.state, c.done, c.failed);
  live->timer.reset();
  save(live);
}

void MeshArrays::save(const std::shared_ptr<Live>& live) {
  // Tasks whose outputs are still on their way are written as pending: a
  // crash before they are home runs them again.
  live->row.run = live->run->to_json();
  for (uint32_t t : live->fetching) {
    if (t < live->row.run["state"].size()) live->row.run["state"][t] = {{"s", "pending"}};
  }
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& [attempt, job] : live->jobs) {
    if (job.value().empty()) continue;
    auto t = live->run->task_of(attempt);
    if (t) tasks[std::to_string(attempt)] = {{"task", *t}, {"mesh_job_id", job.value()}};
  }
  nlohmann::json failed = nlohmann::json::object();
  for (const auto& [t, f] : live->failed) failed[std::to_string(t)] = f;
  tasks["failed"] = std::move(failed);
  if (!live->error.empty()) tasks["error"] = live->error;
  live->row.tasks = std::move(tasks);
  if (live->saving) {
    live->dirty = true;
    return;
  }
  live->saving = true;
  live->dirty = false;
  MeshArrayRow copy = live->row;
  asio::post(blocking_, [this, alive = alive_, live, copy = std::move(copy)] {
    auto st = store_->put(copy);
    asio::post(io_, [this, alive, live, st = std::move(st)] {
      if (!*alive) return;
      if (!st) spdlog::error("array {}: cannot store its state: {}", live->row.id.substr(0, 12), st.error().to_string());
      live->saving = false;
      if (live->dirty) save(live);
      if (live->row.finished() && !live->saving) live_.erase(live->row.id);
    });
  });
}

nlohmann::json MeshArrays::status(const Live& live) const {
  auto c = live.run->counts();
  mesh::UnixMs now = unix_ms();
  nlohmann::json providers = nlohmann::json::array();
  for (const auto& [key, n] : live.run->results_by_provider()) {
    std::string id = NodeId(key).to_string();
    auto name = live.names.find(id);
    providers.push_back({{"provider_id", id}, {"name", name != live.names.end() ? name->second : ""}, {"done", n}});
  }
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& [t, f] : live.failed) {
    if (failed.size() >= kMaxFailedShown) break;
    nlohmann::json j = f;
    j["task"] = t;
    failed.push_back(std::move(j));
  }
  double elapsed_min = static_cast<double>(std::max<mesh::UnixMs>(1, now - live.started_ms)) / 60000.0;
  return {{"array_id", live.row.id},
          {"state", live.row.state},
          {"tasks", live.run->spec().tasks},
          {"limit", live.run->spec().limit},
          {"retries", live.run->spec().retries},
          {"out", live.row.spec.value("out", "") + "/out"},
          {"created_at", live.row.created_at},
          {"counts",
           {{"pending", c.pending},
            {"running", c.running},
            {"done", c.done},
            {"failed", c.failed},
            {"attempts_running", c.attempts_running},
            {"speculative_running", c.speculative_running},
            {"retried", c.retried},
            {"lost", c.lost},
            {"discarded", c.discarded}}},
          {"throughput_per_min", static_cast<double>(c.done) / elapsed_min},
          {"eta_s", live.run->estimate_left_ms(now) / 1000},
          {"providers", providers},
          {"failed", failed},
          {"fetch_errors", live.fetch_errors},
          {"error", live.error}};
}

}  // namespace yonder::mesh
