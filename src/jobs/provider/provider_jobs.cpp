// ProviderJobs: the public calls, scheduling and job views. The runner,
// log pump, watchdog and recovery are in job_runner.cpp.
#include "jobs/provider/provider_jobs.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <variant>

#include "jobs/provider/live_job.h"
#include "os/files.h"
#include "os/netns.h"

namespace yonder::jobs::provider {
namespace {

constexpr size_t kOpenFinishedLogs = 32;
// Waiters on one job's log. A long poll that timed out leaves its waiter
// until the log grows, so a follower of a quiet job adds one per poll:
// past this many, the oldest is woken early (harmless: it reads again and
// finds nothing new).
constexpr size_t kMaxWatchers = 256;

void add_watcher(std::vector<Watcher>& watchers, Watcher w) {
  if (watchers.size() >= kMaxWatchers) {
    Watcher oldest = std::move(watchers.front());
    watchers.erase(watchers.begin());
    oldest.ready();
  }
  watchers.push_back(std::move(w));
}

std::string new_job_id() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 16; ++i) id.push_back("0123456789abcdef"[hex(rd)]);
  return id;
}

}  // namespace

std::optional<ShareHolding> held_share(const JobRecord& r) {
  auto it = r.result.find("share");
  if (it == r.result.end() || !it->is_object()) return std::nullopt;
  auto gpu = it->find("gpu");
  auto bytes = it->find("vram_bytes");
  if (gpu == it->end() || !gpu->is_string() || bytes == it->end() || !bytes->is_number_unsigned()) return std::nullopt;
  return ShareHolding{r.job_id, gpu->get<std::string>(), bytes->get<uint64_t>()};
}

ProviderJobs::ProviderJobs(std::unique_ptr<JobStore> store, exec::Executor& executor, gpu::GpuInventory& inventory,
                           ProviderOptions options, WaitableClock& clock)
    : store_(std::move(store)),
      executor_(executor),
      inventory_(inventory),
      options_(std::move(options)),
      clock_(clock),
      clock_moved_(clock_.on_moved([this] {
        std::lock_guard lock(mutex_);
        watch_cv_.notify_all();
      })) {}

ProviderJobs::~ProviderJobs() { shutdown(); }

int64_t ProviderJobs::now_s() const { return unix_seconds(clock_.now()); }

nlohmann::json ProviderJobs::view(const Live& job) const {
  const JobRecord& r = job.rec;
  nlohmann::json v = {
      {"job_id", r.job_id},
      {"peer_id", r.peer_id},
      {"state", job_state_name(r.state)},
      {"image", r.terms.request.image},
      {"command", r.terms.request.command},
      {"gpus", r.gpu_uuids.empty() ? r.result.value("gpus", nlohmann::json::array()) : nlohmann::json(r.gpu_uuids)},
      {"fake_gpus", r.terms.simulate_gpus},
      {"wall_time_s", r.terms.wall_time_s},
      {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json(nullptr)},
      {"created_at", r.created_at},
      {"updated_at", r.updated_at},
  };
  if (auto share = share_request(r.terms.request)) {
    // What it asked for, and once started, where it runs and its budget.
    nlohmann::json asked = {{"vram_bytes", share->vram_bytes}, {"permille", share->permille}};
    if (share->max_bytes > 0) asked["max_bytes"] = share->max_bytes;
    v["share"] = {{"asked", asked}};
    if (auto held = held_share(r)) {
      v["share"]["gpu"] = held->uuid;
      v["share"]["vram_bytes"] = held->vram_bytes;
      // What part of the GPU that is: its receipt meters that much of the GPU's time.
      v["share"]["permille"] = r.result["share"].value("permille", 1000);
    }
  }
  for (const char* key : {"reason", "message", "oom_killed", "started_at", "finished_at", "waiting_for", "gpu_model",
                          "output_sha256", "log_lost", "outputs_fetched_at", "workspace_removed_at",
                          "log_removed_at"}) {
    if (r.result.contains(key)) v[key] = r.result[key];
  }
  if (r.handle && !r.handle->image_id.empty()) v["image_id"] = r.handle->image_id;
  if (job.log) {
    v["log_bytes"] = job.log->size();
    v["log_truncated"] = job.log->truncated();
  } else if (is_terminal(r.state) && job.closed_log_bytes > 0) {
    v["log_bytes"] = job.closed_log_bytes;
    v["log_truncated"] = job.closed_log_truncated;
  }
  if (!job.stop_reason.empty() && !is_terminal(r.state)) v["stopping"] = job.stop_reason;
  if (r.result.value("held", false)) v["held"] = true;
  if (!r.terms.request.after.empty()) v["after"] = r.terms.request.after;
  if (!r.terms.request.after_ok.empty()) v["after_ok"] = r.terms.request.after_ok;
  if (r.state == JobState::kPending) {
    auto pos = std::find(queue_.begin(), queue_.end(), r.job_id);
    if (pos != queue_.end()) v["queue_position"] = pos - queue_.begin();
  }
  return v;
}

Result<ProviderJobs::LivePtr> ProviderJobs::find(const JobId& job_id) {
  auto it = jobs_.find(job_id.value());
  if (it == jobs_.end()) return make_error(ErrorCode::kNotFound, "no provider job " + job_id.value().substr(0, 64));
  return it->second;
}

Status ProviderJobs::save_locked(Live& job) {
  job.rec.updated_at = now_s();
  return store_->save(job.rec);
}

Result<nlohmann::json> ProviderJobs::submit(const PeerId& peer_id, const JobRequest& request,
                                            const std::string& workspace_seed, int peer_limit) {
  auto resolved = resolve(request, options_.limits);
  if (!resolved) return std::move(resolved).error();
  if (resolved->gpus > 0) {
    auto decision = pick_gpus(inventory_.probe(), {}, resolved->gpus, resolved->vram_bytes);
    if (decision.fit == Fit::kNever) return make_error(ErrorCode::kFailedPrecondition, decision.reason);
  }
  if (resolved->share) {
    GpuView view = gpu_view(inventory_.probe());
    auto decision = pick_share(view, share_configs(options_.gpu_shares, view), {}, {}, {}, *resolved->share);
    if (decision.fit == Fit::kNever) return make_error(ErrorCode::kFailedPrecondition, decision.reason);
  }
  // Image policy, GPU runtime, the VRAM guard, gVisor: refused here, before
  // anything exists.
  exec::TaskSpec probe_spec = resolved->task;
  probe_spec.job_id = "submit-check";
  probe_spec.gpu_uuids.assign(static_cast<size_t>(resolved->share ? 1 : resolved->gpus), "GPU-check");
  if (resolved->share) probe_spec.vram_budget_bytes = 1 << 20;
  probe_spec.simulate_gpus = options_.simulate_gpus;
  YONDER_TRY(executor_.check(probe_spec));

  std::unique_lock lock(mutex_);
  if (!started_) return make_error(ErrorCode::kUnavailable, "the provider job manager has not started");
  if (static_cast<int>(queue_.size()) >= options_.max_queued) {
    return make_error(ErrorCode::kResourceExhausted, "the provider's queue is full (" + std::to_string(queue_.size()) +
                                                         " jobs, jobs.max_queued); try again later");
  }
  int waiting = 0;
  for (const auto& id : queue_) waiting += jobs_.at(id)->rec.peer_id == peer_id.value();
  if (waiting >= options_.max_queued_per_peer) {
    return make_error(ErrorCode::kResourceExhausted,
                      "you already have " + std::to_string(waiting) +
                          " job(s) waiting in this provider's queue, the most it takes from one peer "
                          "(jobs.max_queued_per_peer); wait for them to start or stop one (yonder stop JOB)");
  }
  if (options_.account_disk) {
    if (auto disk = disk_snapshot_locked()) {
      auto d = decide_disk(static_cast<uint64_t>(resolved->task.limits.disk_bytes), *disk);
      if (d.fit == Fit::kNever) return make_error(ErrorCode::kResourceExhausted, d.reason);
    }
  }
  // Dependencies are this peer's own jobs here: another peer's job is
  // "not found", as everywhere a peer names a job that is not its own.
  for (const auto* ids : {&request.after, &request.after_ok}) {
    for (const auto& id : *ids) {
      auto dep = jobs_.find(id);
      if (dep == jobs_.end() || dep->second->rec.peer_id != peer_id.value()) {
        return make_error(ErrorCode::kNotFound, "no job " + id.substr(0, 64) +
                                                    " of yours on this provider: --after and --after-ok name your "
                                                    "jobs on the same provider (yonder ps lists them)");
      }
    }
  }
  auto job = std::make_shared<Live>();
  JobRecord& r = job->rec;
  r.job_id = new_job_id();
  r.peer_id = peer_id.value();
  r.state = JobState::kPending;
  r.terms = job_terms(request, *resolved, options_.simulate_gpus, workspace_seed);
  r.terms.max_running = std::max(0, peer_limit);
  if (request.hold) r.result["held"] = true;
  r.created_at = now_s();
  YONDER_TRY(save_locked(*job));  // persisted before acknowledged
  jobs_[r.job_id] = job;
  queue_.push_back(r.job_id);
  schedule_locked(lock);
  return view(*job);
}

Result<nlohmann::json> ProviderJobs::get(const JobId& job_id) {
  std::lock_guard lock(mutex_);
  auto job = find(job_id);
  if (!job) return std::move(job).error();
  return view(**job);
}

Result<nlohmann::json> ProviderJobs::stats(const JobId& job_id) {
  exec::TaskHandle handle;
  std::vector<std::string> uuids;
  JobTerms terms;
  std::optional<ShareHolding> share;
  // The job as it is now: running with a task, or why there are no stats.
  auto running = [&]() -> Status {
    std::lock_guard lock(mutex_);
    auto job = find(job_id);
    if (!job) return std::move(job).error();
    const JobRecord& r = (*job)->rec;
    if (r.state != JobState::kRunning || !r.handle) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "job " + r.job_id + " is " + job_state_name(r.state) +
                            ": stats are for a running job (`yonder inspect` shows the rest)");
    }
    handle = *r.handle;
    uuids = r.gpu_uuids;
    terms = r.terms;
    share = held_share(r);
    return ok_status();
  };
  YONDER_TRY(running());
  uint64_t vram_limit = terms.vram_bytes;
  if (share) {
    uuids = {share->uuid};
    vram_limit = share->vram_bytes;
  }
  auto used = executor_.stats(handle);
  if (!used) {
    // It may have ended meanwhile (the task gone before its end is
    // recorded): say that rather than the engine's complaint.
    YONDER_TRY(running());
    return std::move(used).error().with_context("reading the job's use from the engine");
  }
  nlohmann::json out = {{"job_id", job_id.value()},
                        {"sampled_at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                              clock_.now().time_since_epoch())
                                              .count()},
                        {"cpu_total_ns", used->cpu_total_ns},
                        {"memory_bytes", used->memory_bytes},
                        {"pids", used->pids},
                        {"gpus", nlohmann::json::array()}};
  // The limits as the job was started with them (resolve is pure).
  if (auto resolved = resolve(terms.request, options_.limits)) {
    out["cpus"] = static_cast<double>(resolved->task.limits.nano_cpus) / 1e9;
    out["memory_limit_bytes"] = resolved->task.limits.memory_bytes;
    out["pids_limit"] = resolved->task.limits.pids;
  }
  if (uuids.empty()) return out;
  auto report = inventory_.probe();
  auto processes = inventory_.processes();
  for (const auto& uuid : uuids) {
    nlohmann::json g = {{"uuid", uuid}, {"utilization_percent", -1}, {"vram_total_bytes", 0},
                        {"vram_limit_bytes", vram_limit}, {"vram_used_bytes", nullptr}};
    for (const auto& d : report.devices) {
      if (d.uuid != uuid) continue;
      g["utilization_percent"] = d.utilization_percent;
      g["vram_total_bytes"] = d.memory_total_bytes;
    }
    if (processes) {
      uint64_t bytes = 0;
      for (const auto& p : *processes) {
        if (p.uuid == uuid && executor_.owns_pid(handle, p.pid)) bytes += p.used_bytes;
      }
      g["vram_used_bytes"] = bytes;
    }
    out["gpus"].push_back(std::move(g));
  }
  return out;
}

Result<nlohmann::json> ProviderJobs::list() { return list(PeerId()); }

std::vector<JobId> ProviderJobs::running() {
  std::lock_guard lock(mutex_);
  std::vector<JobId> out;
  for (const auto& [_, job] : jobs_) {
    if (job->rec.state == JobState::kRunning) out.emplace_back(job->rec.job_id);
  }
  return out;
}

int ProviderJobs::active_jobs(const PeerId& peer_id) {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const auto& [_, job] : jobs_) n += job->rec.peer_id == peer_id.value() && !is_terminal(job->rec.state);
  return n;
}

Result<nlohmann::json> ProviderJobs::list(const PeerId& peer_id) {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  std::vector<const Live*> all;
  for (const auto& [_, job] : jobs_) {
    if (peer_id.value().empty() || job->rec.peer_id == peer_id.value()) all.push_back(job.get());
  }
  std::sort(all.begin(), all.end(), [](const Live* a, const Live* b) {
    return std::tie(a->rec.created_at, a->rec.job_id) < std::tie(b->rec.created_at, b->rec.job_id);
  });
  for (const Live* job : all) out.push_back(view(*job));
  return out;
}

Result<nlohmann::json> ProviderJobs::stop(const JobId& job_id) {
  std::unique_lock lock(mutex_);
  auto job = find(job_id);
  if (!job) return std::move(job).error();
  request_stop_locked(*job, "stopped", "stopped on request");
  schedule_locked(lock);
  return view(**job);
}

Status ProviderJobs::remove(const JobId& job_id) {
  LivePtr job;
  {
    std::lock_guard lock(mutex_);
    auto found = find(job_id);
    if (!found) return std::move(found).error();
    job = *found;
    if (!is_terminal(job->rec.state) || job->runner.joinable()) {
      if (!is_terminal(job->rec.state)) {
        return make_error(
            ErrorCode::kFailedPrecondition,
            "job " + job_id.value() + " is " + job_state_name(job->rec.state) + "; stop it before removing it");
      }
      job->runner.join();  // finished: returns at once
    }
    jobs_.erase(job_id.value());
  }
  if (job->rec.handle) YONDER_TRY(executor_.destroy(*job->rec.handle, true));
  job->log.reset();
  {
    std::lock_guard lock(mutex_);
    open_finished_logs_.erase(std::remove(open_finished_logs_.begin(), open_finished_logs_.end(), job_id.value()),
                              open_finished_logs_.end());
  }
  YONDER_TRY(store_->remove(job_id));
  std::error_code ec;
  std::filesystem::remove_all(options_.jobs_dir + "/" + job_id.value(), ec);
  return ok_status();
}

Result<JobLog*> ProviderJobs::open_log_locked(Live& job) {
  if (!job.log) {
    std::string dir = options_.jobs_dir + "/" + job.rec.job_id;
    YONDER_TRY(os::make_dirs(dir, 0700));
    auto log = JobLog::open(dir + "/output.log", options_.log_max_bytes);
    if (!log) return std::move(log).error();
    job.log = std::move(*log);
  }
  if (is_terminal(job.rec.state)) retire_logs_locked(job.rec.job_id);
  return job.log.get();
}

void ProviderJobs::retire_logs_locked(const std::string& used) {
  auto at = std::find(open_finished_logs_.begin(), open_finished_logs_.end(), used);
  if (at != open_finished_logs_.end()) open_finished_logs_.erase(at);
  open_finished_logs_.push_back(used);
  while (open_finished_logs_.size() > kOpenFinishedLogs) {
    auto it = jobs_.find(open_finished_logs_.front());
    open_finished_logs_.pop_front();
    // Only finished jobs are listed, and their pump has ended (it ends
    // before the runner settles the job): nothing writes these logs.
    if (it == jobs_.end() || !it->second->log || !is_terminal(it->second->rec.state)) continue;
    Live& job = *it->second;
    job.closed_log_bytes = job.log->size();
    job.closed_log_truncated = job.log->truncated();
    job.log.reset();  // closed now, or when the last reader lets go
  }
}

Result<LogRead> ProviderJobs::read_log(const JobId& job_id, uint64_t offset, size_t max_bytes) {
  std::shared_ptr<JobLog> log;  // kept open while reading, even if retired meanwhile
  bool terminal = false;
  {
    std::lock_guard lock(mutex_);
    auto found = find(job_id);
    if (!found) return std::move(found).error();
    Live& job = **found;
    if (job.rec.result.contains("log_removed_at")) {
      return make_error(ErrorCode::kNotFound,
                        "the output of job " + job_id.value() +
                            " was removed by the provider, which keeps ended jobs' logs within jobs.logs_max_mib "
                            "(oldest first); `yonder ps --all` still lists the job and how it ended");
    }
    if (job.rec.state == JobState::kPending) {
      // Nothing to read before it starts; no descriptor held for a
      // thousand queued jobs that someone follows.
      LogRead empty;
      empty.slice.next_offset = offset;
      return empty;
    }
    auto opened = open_log_locked(job);
    if (!opened) return std::move(opened).error();
    log = job.log;
    terminal = is_terminal(job.rec.state);
  }
  auto slice = log->read(offset, max_bytes);
  if (!slice) return std::move(slice).error();
  LogRead out;
  out.ended = terminal && slice->next_offset >= log->size();
  out.slice = std::move(*slice);
  return out;
}

Status ProviderJobs::watch_log(const JobId& job_id, uint64_t offset, std::function<void()> ready) {
  {
    std::lock_guard lock(mutex_);
    auto found = find(job_id);
    if (!found) return std::move(found).error();
    Live& job = **found;
    if (job.rec.state == JobState::kPending) {  // its log is opened when it starts
      add_watcher(job.watchers, {offset, std::move(ready)});
      return ok_status();
    }
    if (job.rec.result.contains("log_removed_at")) {  // read_log says why
      ready();
      return ok_status();
    }
    auto log = open_log_locked(job);
    if (!log) return std::move(log).error();
    if (!(is_terminal(job.rec.state) || (*log)->size() > offset)) {
      add_watcher(job.watchers, {offset, std::move(ready)});
      return ok_status();
    }
  }
  ready();
  return ok_status();
}

void ProviderJobs::notify_watchers_locked(Live& job) {
  if (job.watchers.empty()) return;
  uint64_t size = job.log ? job.log->size() : 0;
  bool terminal = is_terminal(job.rec.state);
  std::vector<Watcher> keep;
  for (auto& w : job.watchers) {
    if (terminal || size > w.offset) {
      w.ready();
    } else {
      keep.push_back(std::move(w));
    }
  }
  job.watchers = std::move(keep);
}

Result<std::unique_ptr<exec::ExecSession>> ProviderJobs::exec(const JobId& job_id, const exec::ExecSpec& spec) {
  exec::TaskHandle handle;
  {
    std::lock_guard lock(mutex_);
    auto job = find(job_id);
    if (!job) return std::move(job).error();
    if ((*job)->rec.state != JobState::kRunning || !(*job)->rec.handle) {
      return make_error(ErrorCode::kFailedPrecondition, "job " + job_id.value() + " is " +
                                                            job_state_name((*job)->rec.state) + ", not running");
    }
    handle = *(*job)->rec.handle;
  }
  return executor_.exec(handle, spec);
}

Result<int> ProviderJobs::connect(const JobId& job_id, uint16_t port) {
  exec::TaskHandle handle;
  {
    std::lock_guard lock(mutex_);
    auto job = find(job_id);
    if (!job) return std::move(job).error();
    if ((*job)->rec.state != JobState::kRunning || !(*job)->rec.handle) {
      return make_error(ErrorCode::kFailedPrecondition, "job " + job_id.value() + " is " +
                                                            job_state_name((*job)->rec.state) + ", not running");
    }
    if ((*job)->rec.terms.request.isolation == exec::Isolation::kGvisor) {
      return make_error(ErrorCode::kPermissionDenied, "a gVisor job's network lives inside its sandbox");
    }
    handle = *(*job)->rec.handle;
  }
  auto status = executor_.inspect(handle);
  if (!status) return std::move(status).error();
  if (status->state != exec::TaskState::kRunning)
    return make_error(ErrorCode::kFailedPrecondition, "job " + job_id.value() + " is not running");
  int pid = status->pid;
  auto ns = os::open_netns_of(pid, [&] { return executor_.owns_pid(handle, pid); });
  if (!ns) return std::move(ns).error();
  auto fd = os::connect_loopback_in_netns(*ns, port);
  ::close(*ns);
  return fd;
}

nlohmann::json ProviderJobs::executor_status() {
  exec::Fingerprint fp = executor_.fingerprint();
  std::lock_guard lock(mutex_);
  int running = 0;
  for (const auto& [_, job] : jobs_) running += job->rec.state == JobState::kRunning || job->rec.state == JobState::kStarting;
  return {{"backend", fp.backend},          {"healthy", fp.healthy},       {"engine", fp.engine},
          {"version", fp.version},          {"runtimes", fp.runtimes},     {"gpu_capable", fp.gpu_capable},
          {"gpu_detail", fp.gpu_detail},    {"detail", fp.detail},         {"running", running},
          {"queued", queue_.size()},        {"leases", leases_},           {"fake_gpus", options_.simulate_gpus},
          {"max_concurrent", options_.max_concurrent}, {"max_per_peer", options_.max_per_peer},
          {"vram_watch_error", vram_watch_error_}, {"shares", shares_locked()}};
}

nlohmann::json ProviderJobs::offer() {
  gpu::InventoryReport report = inventory_.probe();  // outside the lock: NVML may block
  nlohmann::json inventory = gpu::to_json(report);
  nlohmann::json shareable = nlohmann::json::object();
  GpuView view = gpu_view(report);
  for (const auto& c : share_configs(options_.gpu_shares, view)) {
    for (const auto& d : view.devices) {
      if (d.uuid == c.uuid) shareable[c.uuid] = {{"max_jobs", c.max_jobs}, {"vram_bytes", share_capacity(c, d)}};
    }
  }
  std::lock_guard lock(mutex_);
  int running = 0;
  for (const auto& [_, job] : jobs_) running += job->rec.state == JobState::kRunning || job->rec.state == JobState::kStarting;
  nlohmann::json leased = nlohmann::json::object();
  for (const auto& [uuid, _] : leases_) leased[uuid] = true;
  nlohmann::json shared = nlohmann::json::object();
  const nlohmann::json shares = shares_locked();
  for (const auto& [uuid, held] : shares.items()) {
    uint64_t bytes = 0;
    for (const auto& h : held) bytes += h.value("vram_bytes", uint64_t{0});
    shared[uuid] = {{"jobs", held.size()}, {"vram_bytes", bytes}};
  }
  const ProviderLimits& l = options_.limits;
  return {{"inventory", std::move(inventory)},
          {"leased", std::move(leased)},
          {"shared", std::move(shared)},
          {"shareable", std::move(shareable)},
          {"limits",
           {{"max_cpus", l.max_cpus},
            {"max_memory_mib", l.max_memory_mib},
            {"max_disk_mib", l.max_disk_mib},
            {"max_wall_time_s", l.max_wall_time_s},
            {"egress", l.allow_egress},
            {"gvisor", l.allow_gvisor}}},
          {"running", running},
          {"queued", queue_.size()},
          {"max_concurrent", options_.max_concurrent},
          {"max_per_peer", options_.max_per_peer}};
}

nlohmann::json ProviderJobs::shares_locked() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [_, job] : jobs_) {
    if (job->rec.state != JobState::kStarting && job->rec.state != JobState::kRunning) continue;
    if (auto share = held_share(job->rec)) {
      out[share->uuid].push_back({{"job_id", share->job_id}, {"vram_bytes", share->vram_bytes}});
    }
  }
  return out;
}

void ProviderJobs::schedule() {
  std::unique_lock lock(mutex_);
  schedule_locked(lock);
}

void ProviderJobs::schedule_locked(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  if (!started_ || shutting_down_) return;
  reap_locked();
  while (!apply_locked(plan_queue(snapshot_locked(clock_.steady_now(), true)))) {
  }
}

QueueSnapshot ProviderJobs::snapshot_locked(MonoTime now, bool queue) {
  QueueSnapshot s;
  s.now = now;
  s.max_concurrent = options_.max_concurrent;
  s.max_per_peer = options_.max_per_peer;
  for (const auto& [_, job] : jobs_) {
    const JobRecord& r = job->rec;
    if (r.state != JobState::kStarting && r.state != JobState::kRunning) continue;
    ActiveJob a;
    a.job_id = r.job_id;
    a.peer_id = r.peer_id;
    a.running = r.state == JobState::kRunning;
    a.stopping = !job->stop_reason.empty();
    a.deadline = job->deadline;
    a.wall_time_s = r.terms.wall_time_s;
    a.gpu_uuids = r.gpu_uuids;
    a.vram_limited = r.terms.vram_bytes > 0;
    if (auto share = held_share(r)) {
      a.gpu_uuids = {share->uuid};
      a.share_vram_bytes = share->vram_bytes;
      a.vram_limited = true;
    }
    s.active.push_back(std::move(a));
  }
  if (!queue) return s;
  bool gpu_jobs = false;
  for (const auto& id : queue_) {
    const JobRecord& r = jobs_.at(id)->rec;
    s.queue.push_back({r.job_id, r.peer_id, r.terms.gpus, r.terms.vram_bytes, disk_promise(r), r.terms.max_running,
                       r.result.value("held", false), dependencies_locked(r), share_request(r.terms.request)});
    gpu_jobs = gpu_jobs || s.queue.back().gpus > 0 || s.queue.back().share;
  }
  if (queue_order_ && queue_.size() > 1) {
    std::vector<QueuedJob> waiting;
    for (const auto& id : queue_) {
      const JobRecord& r = jobs_.at(id)->rec;
      waiting.push_back({r.job_id, r.peer_id, r.created_at});
    }
    s.preferred_order = queue_order_(waiting);
  }
  // Read once per pass (NVML; statvfs and a stat per image), and only when
  // the pass may start something; the core keeps them current as it
  // promises devices and disk.
  bool room = !queue_.empty() && static_cast<int>(s.active.size()) < options_.max_concurrent;
  if (room && gpu_jobs) {
    s.gpus = gpu_view(inventory_.probe());
    s.gpu_shares = share_configs(options_.gpu_shares, *s.gpus);
  }
  if (room && options_.account_disk) s.disk = disk_snapshot_locked();
  return s;
}

std::vector<Dependency> ProviderJobs::dependencies_locked(const JobRecord& r) const {
  std::vector<Dependency> out;
  for (const auto* ids : {&r.terms.request.after, &r.terms.request.after_ok}) {
    for (const auto& id : *ids) {
      Dependency d;
      d.job_id = id;
      d.ok_only = ids == &r.terms.request.after_ok;
      auto it = jobs_.find(id);
      if (it == jobs_.end()) {
        d.state = Dependency::State::kGone;
      } else if (const JobRecord& dep = it->second->rec; !is_terminal(dep.state)) {
        d.state = Dependency::State::kPending;
      } else if (dep.state == JobState::kExited && dep.exit_code == 0) {
        d.state = Dependency::State::kSucceeded;
      } else {
        d.state = Dependency::State::kFailed;
        d.how = dep.state == JobState::kExited && dep.exit_code ? "exited with " + std::to_string(*dep.exit_code)
                                                                 : std::string(job_state_name(dep.state));
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

Result<nlohmann::json> ProviderJobs::set_held(const JobId& job_id, bool held) {
  std::unique_lock lock(mutex_);
  auto job = find(job_id);
  if (!job) return std::move(job).error();
  JobRecord& r = (*job)->rec;
  if (r.state != JobState::kPending) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "job " + r.job_id + " is " + job_state_name(r.state) + ": only a job still waiting in the queue "
                                                                              "can be " + (held ? "held" : "released"));
  }
  if (held) {
    r.result["held"] = true;
  } else {
    r.result.erase("held");
    r.result.erase("waiting_for");
  }
  YONDER_TRY(save_locked(**job));  // on disk before it is acknowledged
  schedule_locked(lock);
  return view(**job);
}

bool ProviderJobs::apply_locked(const QueuePlan& plan) {
  queue_.assign(plan.order.begin(), plan.order.end());
  auto leave_queue = [this](const std::string& id) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
  };
  for (const auto& action : plan.actions) {
    if (const auto* stop = std::get_if<StopJob>(&action)) {
      request_stop_locked(jobs_.at(stop->job_id), stop->reason, stop->message);
    } else if (const auto* wait = std::get_if<WaitJob>(&action)) {
      jobs_.at(wait->job_id)->rec.result["waiting_for"] = wait->reason;
    } else if (const auto* refuse = std::get_if<RefuseJob>(&action)) {
      leave_queue(refuse->job_id);
      finish_locked(jobs_.at(refuse->job_id), JobState::kFailed, refuse->code, refuse->reason, std::nullopt);
    } else if (const auto* start = std::get_if<StartJob>(&action)) {
      LivePtr job = jobs_.at(start->job_id);
      JobRecord& r = job->rec;
      // The model the receipt names (mesh/core/metering.h).
      if (!start->gpu_uuids.empty()) r.result["gpu_model"] = start->gpu_model;
      leave_queue(r.job_id);
      r.state = JobState::kStarting;
      if (start->share_vram_bytes > 0) {
        // A share is not a lease (live_job.h: held_share): kept in the record.
        r.result["share"] = {{"gpu", start->gpu_uuids.front()},
                             {"vram_bytes", start->share_vram_bytes},
                             {"permille", start->share_permille}};
      } else {
        r.gpu_uuids = start->gpu_uuids;
      }
      r.result.erase("waiting_for");
      if (auto saved = save_locked(*job); !saved) {
        r.gpu_uuids.clear();
        r.result.erase("share");
        finish_locked(job, JobState::kFailed, "start_failed", saved.error().to_string(), std::nullopt);
        return false;
      }
      for (const auto& u : r.gpu_uuids) leases_[u] = r.job_id;
      job->runner = std::thread(&ProviderJobs::run, this, job, false);
    }
    // SweepDisk and SampleVram come only from the watchdog's snapshot.
  }
  return true;
}

void ProviderJobs::set_queue_order(std::function<std::vector<std::string>(const std::vector<QueuedJob>&)> order) {
  std::unique_lock lock(mutex_);
  queue_order_ = std::move(order);
  schedule_locked(lock);
}

void ProviderJobs::set_limits(int max_per_peer, int max_queued, int max_queued_per_peer) {
  std::unique_lock lock(mutex_);
  options_.max_per_peer = std::max(1, max_per_peer);
  options_.max_queued = std::max(0, max_queued);
  options_.max_queued_per_peer = std::max(0, max_queued_per_peer);
  schedule_locked(lock);
}

void ProviderJobs::reap_locked() {
  for (auto& [_, job] : jobs_) {
    if (job->runner_done.load() && job->runner.joinable()) job->runner.join();
  }
}

}  // namespace yonder::jobs::provider
