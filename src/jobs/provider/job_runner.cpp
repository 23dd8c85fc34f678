// ProviderJobs: the life of a running job (runner and log pump threads),
// the watchdog (wall time, VRAM), recovery after a restart, and shutdown.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <variant>

#include <spdlog/spdlog.h>

#include "jobs/provider/live_job.h"
#include "jobs/provider/provider_jobs.h"
#include "jobs/provider/workspace_digest.h"
#include "os/files.h"

namespace yonder::jobs::provider {

// In the job's folder: the seed's file digests (workspace_digest.h).
constexpr const char* kSeedDigestsFile = "seed-digests.json";

void ProviderJobs::finish_locked(const LivePtr& job, JobState state, const std::string& reason,
                                 const std::string& message, std::optional<exec::ExitInfo> exit) {
  JobRecord& r = job->rec;
  r.state = state;
  r.result["reason"] = reason;
  r.result["message"] = message;
  r.result["finished_at"] = now_s();
  if (exit) {
    r.exit_code = exit->exit_code;
    r.result["oom_killed"] = exit->oom_killed;
  }
  if (!r.gpu_uuids.empty()) r.result["gpus"] = r.gpu_uuids;
  if (!job->log_lost.empty()) {
    // Never a silent gap: the job's view says what is missing, and so does
    // its log when there is room for the notice by now.
    std::string lost = "part of the job's output was not kept: " + job->log_lost;
    r.result["log_lost"] = lost;
    r.result["message"] = message + "; " + lost;
    if (auto log = open_log_locked(*job); log) {
      (void)(*log)->append(exec::LogStream::kSystem, now_s() * 1'000'000'000, "[yonder] " + lost + "\n");
    }
  }
  // What the metering receipt commits to (mesh/core/metering.h); the pump is done.
  if (auto log = open_log_locked(*job); log) {
    if (auto hash = (*log)->output_sha256(job->files_digest); hash) r.result["output_sha256"] = *hash;
  }
  for (const auto& u : r.gpu_uuids) leases_.erase(u);
  r.gpu_uuids.clear();  // the save below deletes the lease rows
  job->deadline.reset();
  // On failure (a full disk) the watchdog writes it again every second
  // until it is written: its container is gone by now, so a restart would
  // find only a job it lost track of.
  if (!save_locked(*job)) {
    job->unsaved_end = true;
    watch_cv_.notify_all();
  }
  notify_watchers_locked(*job);
  sweep_due_ = true;
  watch_cv_.notify_all();
  if (on_finished_) on_finished_(view(*job));
}

void ProviderJobs::set_on_finished(std::function<void(const nlohmann::json& view)> hook) {
  std::lock_guard lock(mutex_);
  on_finished_ = std::move(hook);
}

void ProviderJobs::request_stop_locked(const LivePtr& job, const std::string& reason, const std::string& message) {
  if (is_terminal(job->rec.state) || !job->stop_reason.empty()) return;
  job->stop_reason = reason;
  job->stop_message = message;
  if (job->rec.state == JobState::kPending) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job->rec.job_id), queue_.end());
    finish_locked(job, JobState::kStopped, reason, message, std::nullopt);
    return;
  }
  if (job->rec.state == JobState::kRunning && job->rec.handle && !job->stopper.joinable()) {
    job->stopper = std::thread([this, handle = *job->rec.handle] {
      (void)executor_.stop(handle, SIGTERM, options_.stop_grace);
    });
  }
  // kStarting: the runner sees stop_reason once start() returns.
}

void ProviderJobs::run(LivePtr job, bool recovered) {
  exec::TaskHandle handle;
  if (!recovered) {
    exec::TaskSpec task;
    std::string error;
    {
      std::lock_guard lock(mutex_);
      auto resolved = resolve(job->rec.terms.request, options_.limits);
      if (resolved) {
        task = resolved->task;
        task.job_id = job->rec.job_id;
        task.gpu_uuids = job->rec.gpu_uuids;
        if (auto share = held_share(job->rec)) {
          task.gpu_uuids = {share->uuid};
          task.vram_budget_bytes = share->vram_bytes;
        }
        task.simulate_gpus = job->rec.terms.simulate_gpus;
        task.seed_dir = job->rec.terms.workspace_seed;
      } else {
        error = resolved.error().to_string();
      }
    }
    Result<exec::TaskHandle> started = error.empty() ? executor_.start(task) : Result<exec::TaskHandle>(make_error(ErrorCode::kInvalidArgument, error));
    if (started && !task.seed_dir.empty()) {
      // What the workspace started with, for the outputs part of the
      // receipt's output hash (kept on disk for a restarted provider).
      // Not kept (a full disk): every file then counts as an output.
      std::string dir = options_.jobs_dir + "/" + job->rec.job_id;
      auto seed = digest_tree(task.seed_dir);
      if (seed && os::make_dirs(dir, 0700)) (void)write_file_digests(dir + "/" + kSeedDigestsFile, seed->files);
    }
    if (!task.seed_dir.empty()) {  // copied into the workspace (or the start failed): not needed again
      std::error_code ec;
      std::filesystem::remove_all(task.seed_dir, ec);
    }
    std::unique_lock lock(mutex_);
    if (!started) {
      // The consumer sees the reason in the job record; the provider's
      // operator sees it here (an engine that refuses every job, say
      // Podman without catatonit, shows up in the daemon's log).
      spdlog::warn("job {} failed to start: {}", job->rec.job_id, started.error().to_string());
      finish_locked(job, JobState::kFailed, "start_failed", started.error().to_string(), std::nullopt);
      schedule_locked(lock);
      job->runner_done = true;
      return;
    }
    handle = *started;
    job->rec.handle = handle;
    job->rec.state = JobState::kRunning;
    job->rec.result["started_at"] = now_s();
    (void)save_locked(*job);  // labels find the container even if this write is lost
    job->deadline = clock_.steady_now() + std::chrono::seconds(wall_time_s(job->rec));
    if (!job->stop_reason.empty()) {
      std::string reason = job->stop_reason, message = job->stop_message;
      job->stop_reason.clear();
      request_stop_locked(job, reason, message);
    }
    watch_cv_.notify_all();
  } else {
    std::lock_guard lock(mutex_);
    handle = *job->rec.handle;
    int64_t started_at = job->rec.result.value("started_at", now_s());
    int64_t wall = wall_time_s(job->rec);
    job->deadline = clock_.steady_now() + std::chrono::seconds(std::max<int64_t>(0, started_at + wall - now_s()));
    watch_cv_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    if (open_log_locked(*job)) job->pump = std::thread(&ProviderJobs::pump, this, job, handle);
  }

  auto exit = executor_.wait(handle, [this, job](std::shared_ptr<exec::Cancel> c) {
    std::lock_guard lock(mutex_);
    job->wait_cancel = c;
    if (shutting_down_) c->cancel();
  });
  bool daemon_stopping = false;
  {
    std::unique_lock lock(mutex_);
    daemon_stopping = shutting_down_;
    if (!daemon_stopping && job->pump.joinable()) {
      // The follow stream ends when the container does, once the engine has
      // delivered what it holds: a slow reader may still be catching up on
      // megabytes. Wait while entries keep arriving; cut the stream only
      // after 10 s without one, and say so in the job's end.
      uint64_t seen = job->pump_entries;
      while (!job->pump_done) {
        if (job->pump_cv.wait_for(lock, std::chrono::seconds(10),
                                  [&] { return job->pump_done || job->pump_entries != seen; })) {
          seen = job->pump_entries;
          continue;
        }
        if (job->pump_cancel) job->pump_cancel->cancel();
        job->pump_cut = true;
        if (job->log_lost.empty()) {
          job->log_lost = "the container engine stopped delivering the job's output 10 s after the job ended";
        }
        job->pump_cv.notify_all();
        break;
      }
    }
  }
  if (job->pump.joinable()) job->pump.join();
  if (job->stopper.joinable()) job->stopper.join();
  if (daemon_stopping) {
    job->runner_done = true;  // the task runs on; the next start() re-adopts it
    return;
  }
  if (!exit) {
    auto status = executor_.inspect(handle);
    if (status && status->state == exec::TaskState::kExited) exit = status->exit;
  }
  // The files the job created or changed, read while the workspace is still
  // mounted and nothing writes it any more.
  std::string files_digest;
  if (!handle.workspace.empty()) {
    auto after = digest_tree(handle.workspace);
    if (after) {
      auto before = read_file_digests(options_.jobs_dir + "/" + job->rec.job_id + "/" + kSeedDigestsFile);
      files_digest = outputs_digest(*after, before ? *before : FileDigests{});
    }
  }
  std::string cleanup;
  if (auto destroyed = executor_.destroy(handle, false); !destroyed) {
    cleanup = " (cleaning up failed: " + destroyed.error().to_string() + ")";
  }
  std::unique_lock lock(mutex_);
  job->files_digest = files_digest;
  if (!exit) {
    finish_locked(job, JobState::kFailed, "lost", "lost track of the job's task: " + exit.error().to_string() + cleanup,
                  std::nullopt);
  } else if (!job->stop_reason.empty()) {
    finish_locked(job, JobState::kStopped, job->stop_reason, job->stop_message + cleanup, *exit);
  } else if (exit->oom_killed) {
    int64_t mib = job->rec.terms.request.memory_mib;
    finish_locked(job, JobState::kExited, "out_of_memory",
                  "the job ran out of memory" + (mib > 0 ? " (limit " + std::to_string(mib) + " MiB)" : std::string()) +
                      " and was killed" + cleanup,
                  *exit);
  } else if (!exit->cause.empty()) {
    // The backend ended it (a cluster's time limit, node failure,
    // cancellation or preemption): the backend's words, its cause as reason.
    JobState state = exit->cause == "node_failure" || exit->cause == "refused" ? JobState::kFailed : JobState::kStopped;
    finish_locked(job, state, exit->cause, exit->error + cleanup, *exit);
  } else {
    finish_locked(job, JobState::kExited, "exited", "exited with code " + std::to_string(exit->exit_code) + cleanup, *exit);
  }
  schedule_locked(lock);
  job->runner_done = true;
}

void ProviderJobs::pump(LivePtr job, exec::TaskHandle handle) {
  JobLog* log = job->log.get();
  exec::LogOptions options;
  options.follow = true;
  options.since_unix_ns = log->last_unix_ns();
  auto sink = [&](exec::LogStream stream, int64_t ns, std::string_view data) {
    auto more = log->append(stream, ns, data);
    // Disk full: hold the entry (the engine keeps the job's output
    // meanwhile, and the job runs on) and try again every second until
    // there is room, the runner stops waiting for us, or the daemon stops.
    // Then the rest is lost, and the job's end says so (finish_locked).
    while (!more && more.error().code() == ErrorCode::kResourceExhausted) {
      std::unique_lock lock(mutex_);
      job->log_lost = more.error().message();
      if (shutting_down_ || job->pump_cut) return false;
      job->pump_cv.wait_for(lock, std::chrono::seconds(1), [&] { return shutting_down_ || job->pump_cut; });
      lock.unlock();
      more = log->append(stream, ns, data);
    }
    std::lock_guard lock(mutex_);
    if (!more) {
      job->log_lost = more.error().message();
    } else if (!job->pump_cut) {
      job->log_lost.clear();  // there was room again: nothing was lost
    }
    ++job->pump_entries;
    job->pump_cv.notify_all();
    notify_watchers_locked(*job);
    return more.ok() && *more;
  };
  (void)executor_.logs(handle, options, sink, [this, job](std::shared_ptr<exec::Cancel> c) {
    std::lock_guard lock(mutex_);
    job->pump_cancel = c;
    if (shutting_down_) c->cancel();
  });
  std::lock_guard lock(mutex_);
  job->pump_done = true;
  job->pump_cv.notify_all();
  notify_watchers_locked(*job);
}

void ProviderJobs::watchdog(MonoTime started) {
  std::unique_lock lock(mutex_);
  // Its timers count from start(), not from whenever this thread first runs.
  auto next_vram = started + options_.vram_interval;
  auto last_sweep = MonoTime::min();
  const bool sweeps = options_.account_disk || options_.logs_max_bytes > 0;
  while (!shutting_down_) {
    auto now = clock_.steady_now();
    auto wake = MonoTime::max();
    for (auto& [_, job] : jobs_) {
      if (!job->unsaved_end) continue;
      if (save_locked(*job)) {
        job->unsaved_end = false;
      } else {
        wake = std::min(wake, now + std::chrono::seconds(1));
      }
    }
    // The deadlines are queue_core.h's; the queue itself is decided where
    // jobs come and go (schedule_locked), not here.
    QueueSnapshot snapshot = snapshot_locked(now, false);
    snapshot.vram_sample_at = next_vram;
    if (sweeps) {
      // Ended workspaces: when one passes its retention, or a job ended or
      // had its outputs fetched (the cap may now be exceeded). At most one
      // sweep a second, so a workspace that cannot be removed is tried
      // again without spinning.
      auto next_sweep = std::max(next_sweep_locked(now), last_sweep + std::chrono::seconds(1));
      if (next_sweep != MonoTime::max()) snapshot.sweep_at = next_sweep;
      snapshot.sweep_requested = sweep_due_;
    }
    QueuePlan plan = plan_queue(snapshot);
    bool sweep = false, sample_vram = false;
    for (const auto& action : plan.actions) {
      if (const auto* stop = std::get_if<StopJob>(&action)) {
        request_stop_locked(jobs_.at(stop->job_id), stop->reason, stop->message);
      }
      sweep = sweep || std::holds_alternative<SweepDisk>(action);
      sample_vram = sample_vram || std::holds_alternative<SampleVram>(action);
    }
    if (sweep) {
      sweep_due_ = false;
      lock.unlock();
      sweep_logs();
      sweep_workspaces();
      lock.lock();
      last_sweep = clock_.steady_now();
      schedule_locked(lock);  // space came back: a job waiting for disk may start
      continue;
    }
    if (sample_vram) {
      lock.unlock();
      check_vram();
      lock.lock();
      next_vram = clock_.steady_now() + options_.vram_interval;
      continue;
    }
    if (plan.next_deadline) wake = std::min(wake, *plan.next_deadline);
    clock_.wait_until(watch_cv_, lock, wake);
  }
}

void ProviderJobs::check_vram() {
  auto processes = inventory_.processes();
  struct Watched {
    LivePtr job;
    exec::TaskHandle handle;
    std::vector<std::string> uuids;
    uint64_t limit;
  };
  std::vector<Watched> watched;
  {
    std::lock_guard lock(mutex_);
    if (!processes) {
      vram_watch_error_ = "VRAM limits are not enforced: " + processes.error().to_string();
      return;
    }
    vram_watch_error_.clear();
    for (auto& [_, job] : jobs_) {
      uint64_t limit = job->rec.terms.vram_bytes;
      std::vector<std::string> uuids = job->rec.gpu_uuids;
      if (auto share = held_share(job->rec)) {
        // The last line behind the guard in the container (gpu_shares.h).
        limit = share->vram_bytes;
        uuids = {share->uuid};
      }
      if (job->rec.state == JobState::kRunning && job->rec.handle && limit > 0 && !uuids.empty()) {
        watched.push_back({job, *job->rec.handle, std::move(uuids), limit});
      }
    }
  }
  for (auto& w : watched) {
    for (const auto& uuid : w.uuids) {
      uint64_t used = 0;
      for (const auto& p : *processes) {
        if (p.uuid == uuid && executor_.owns_pid(w.handle, p.pid)) used += p.used_bytes;
      }
      if (used > w.limit) {
        std::lock_guard lock(mutex_);
        request_stop_locked(w.job, "vram_exceeded",
                            "stopped: the job used " + std::to_string(used >> 20) + " MiB of GPU memory on " + uuid +
                                ", over its limit of " + std::to_string(w.limit >> 20) + " MiB");
        break;
      }
    }
  }
}

Status ProviderJobs::start() {
  auto records = store_->list();
  if (!records) return std::move(records).error().with_context("reading provider jobs");
  auto owned = executor_.list_owned();
  if (!owned) return std::move(owned).error().with_context("finding this node's containers");
  std::vector<exec::OwnedTask> orphans;
  {
    std::unique_lock lock(mutex_);
    if (started_) return ok_status();
    // The volume the disk promises are read from (disk_budget.h).
    if (!options_.jobs_dir.empty()) YONDER_TRY(os::make_dirs(options_.jobs_dir, 0700));
    recover_locked(*records, *owned);
    for (const auto& task : *owned) {
      auto it = jobs_.find(task.job_id);
      bool claimed = it != jobs_.end() && (it->second->rec.state == JobState::kRunning ||
                                           it->second->rec.state == JobState::kStarting);
      if (!claimed) orphans.push_back(task);
    }
    started_ = true;
    watchdog_ = std::thread(&ProviderJobs::watchdog, this, clock_.steady_now());
  }
  // Reconcile: a container labelled as ours that no live job claims.
  for (const auto& task : orphans) (void)executor_.destroy(task.handle, false);
  schedule();
  return ok_status();
}

void ProviderJobs::recover_locked(const std::vector<JobRecord>& records, const std::vector<exec::OwnedTask>& owned) {
  for (const auto& rec : records) {
    auto job = std::make_shared<Live>();
    job->rec = rec;
    jobs_[rec.job_id] = job;
    if (rec.state == JobState::kPending) {
      queue_.push_back(rec.job_id);
      continue;
    }
    if (is_terminal(rec.state)) continue;
    auto task = std::find_if(owned.begin(), owned.end(), [&](const exec::OwnedTask& t) { return t.job_id == rec.job_id; });
    if (task == owned.end()) {
      finish_locked(job, JobState::kFailed, "lost", "the job's container disappeared while yonderd was not running",
                    std::nullopt);
      continue;
    }
    // A job killed between create and the write of its handle: the label
    // and the backend's naming rule rebuild the handle.
    if (!job->rec.handle || job->rec.handle->task_id != task->task_id) job->rec.handle = task->handle;
    for (const auto& u : job->rec.gpu_uuids) leases_[u] = rec.job_id;
    if (!task->running && rec.state == JobState::kStarting) {
      // Created but never started: the start was cut short.
      (void)executor_.destroy(task->handle, false);
      finish_locked(job, JobState::kFailed, "interrupted", "yonderd stopped while starting the job; submit it again",
                    std::nullopt);
      continue;
    }
    job->rec.state = JobState::kRunning;
    if (!job->rec.result.contains("started_at")) job->rec.result["started_at"] = now_s();
    (void)save_locked(*job);
    job->runner = std::thread(&ProviderJobs::run, this, job, true);
  }
}

void ProviderJobs::shutdown() {
  std::vector<LivePtr> all;
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_) return;
    shutting_down_ = true;
    for (auto& [_, job] : jobs_) {
      if (job->wait_cancel) job->wait_cancel->cancel();
      if (job->pump_cancel) job->pump_cancel->cancel();
      all.push_back(job);
    }
    watch_cv_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& job : all) {
    if (job->runner.joinable()) job->runner.join();
  }
}

}  // namespace yonder::jobs::provider
