// The provider's job manager: a persistent queue in front of an
// exec::Executor. Jobs wait for GPUs and slots instead of being refused; a
// job that can never fit is refused at submit with the reason. Each job is
// written to SQLite before submit() returns, and its task handle as soon as
// the executor gives one. After a crash, start() re-adopts running tasks,
// records how finished ones ended, and removes tasks nobody claims.
//
// What to start, wait, refuse or stop, and when to look again, is decided
// by queue_core.h (pure; its opening comment states the queue's policy);
// this class gathers the snapshot and does the I/O the plan asks for.
//
// Per running job, one runner thread (start, wait, clean up) and one log
// pump thread (executor logs -> JobLog); one watchdog thread for all jobs
// enforces wall time (a deadline wait, not polling) and VRAM limits (NVML
// has no events: it samples every vram_interval).
//
// Time comes from the WaitableClock it is given (base/clock.h): the steady
// face for wall-time deadlines and the watchdog's timers, the wall face for
// the timestamps in job records. The watchdog sleeps on that clock and
// wakes when a manual one moves (WaitableClock::on_moved), so a test moves
// time and then awaits what follows, without sleeping; the unit tests run
// the manager on the FakeExecutor's time this way
// (tests/jobs/provider/provider_jobs_fake_test.cpp). Two waits stay in
// real time on purpose: how long the runner waits for the engine to
// deliver a finished job's output, and the pump's retry pace on a full
// disk (both are about a real engine and a real disk, not the job's time).
//
// Threading: every public method may block (SQLite, Docker) and is called
// from worker threads, never from the event loop. watch_log's callback runs
// on an internal thread; post from it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "base/strong_id.h"
#include "exec/executor.h"
#include "gpu/inventory.h"
#include "jobs/provider/disk_budget.h"
#include "jobs/provider/gpu_leases.h"
#include "jobs/provider/job_log.h"
#include "jobs/provider/job_terms.h"
#include "jobs/provider/job_store.h"
#include "jobs/provider/queue_core.h"

namespace yonder::jobs::provider {

struct ProviderOptions {
  ProviderLimits limits;
  int max_concurrent = 4;        // starting + running, all peers
  int max_per_peer = 2;
  int max_queued = 100;
  int max_queued_per_peer = 20;  // one peer's jobs waiting
  uint64_t log_max_bytes = 16 << 20;
  std::string jobs_dir;          // per-job folders (logs; the executor keeps workspaces there too)
  std::chrono::seconds stop_grace{10};
  std::chrono::milliseconds vram_interval{2000};
  bool simulate_gpus = false;    // fake inventory without an NVIDIA runtime (tests only)
  std::vector<ShareRule> gpu_shares;  // gpu.share: the devices lent as shares (gpu_shares.h)
  // Workspace disk (disk_budget.h): promised only when the volume has it,
  // minus the reserve the node keeps for its own state; ended workspaces
  // are taken back after the retention or past the cap.
  bool account_disk = true;      // false: the backend keeps no workspace images here (Slurm)
  uint64_t disk_reserve_bytes = 2048ULL << 20;
  double disk_reserve_percent = 5;
  std::chrono::seconds workspace_retention{86400};
  uint64_t workspaces_max_bytes = 20480ULL << 20;  // 0: no cap
  uint64_t logs_max_bytes = 4096ULL << 20;         // ended jobs' logs together; 0: no cap
};

struct LogRead {
  LogSlice slice;
  bool ended = false;  // the job is over and nothing is left past next_offset
};

class ProviderJobs {
 public:
  // `clock` must outlive the manager.
  ProviderJobs(std::unique_ptr<JobStore> store, exec::Executor& executor, gpu::GpuInventory& inventory,
               ProviderOptions options, WaitableClock& clock = real_clock());
  ~ProviderJobs();
  ProviderJobs(const ProviderJobs&) = delete;
  ProviderJobs& operator=(const ProviderJobs&) = delete;

  // Recovery and reconciliation, then scheduling. Call once.
  Status start();
  // Stops watching (threads end; tasks keep running for the next start()).
  void shutdown();

  // Persists the job (queued) and schedules it. Returns the job's view.
  // `workspace_seed`: a folder of uploaded files the workspace starts with
  // (exec::TaskSpec::seed_dir); the manager deletes it once the job started.
  // `peer_limit`: how many of this peer's jobs its scope lets run at once
  // (0: only jobs.max_per_peer); past it the job waits in the queue.
  Result<nlohmann::json> submit(const PeerId& peer_id, const JobRequest& request,
                                const std::string& workspace_seed = "", int peer_limit = 0);
  Result<nlohmann::json> get(const JobId& job_id);
  // A running job's use of the host now (`yonder stats`): {"job_id",
  // "sampled_at_ms", "cpu_total_ns" (since it started; a rate needs two
  // samples), "cpus" (its limit), "memory_bytes", "memory_limit_bytes",
  // "pids", "pids_limit", "gpus": [{"uuid", "utilization_percent" (-1
  // unknown), "vram_used_bytes" (by the job's own processes; null when the
  // driver cannot say), "vram_total_bytes", "vram_limit_bytes" (0: none)}]}.
  // kFailedPrecondition when the job is not running. Blocking (the engine,
  // NVML).
  Result<nlohmann::json> stats(const JobId& job_id);
  // The jobs running now (for the node's history of their use).
  std::vector<JobId> running();
  Result<nlohmann::json> list();
  // One peer's jobs, oldest first, and how many of them are queued,
  // starting or running: without building a view of every job ever run.
  Result<nlohmann::json> list(const PeerId& peer_id);
  int active_jobs(const PeerId& peer_id);
  // Stops a job (SIGTERM, grace, SIGKILL); a queued job just leaves the queue.
  Result<nlohmann::json> stop(const JobId& job_id);
  // Holds a queued job where it is (it keeps its place but does not start)
  // or releases it; kFailedPrecondition for a job no longer queued.
  Result<nlohmann::json> set_held(const JobId& job_id, bool held);
  // Forgets a finished job: its record, log and workspace.
  Status remove(const JobId& job_id);
  // The job's outputs went home (a fetch ended): its workspace may go
  // before its retention when ended workspaces are over their cap.
  void outputs_fetched(const JobId& job_id);
  // Removes the ended workspaces disk_budget.h says should go now; the
  // watchdog calls it on its own schedule. Returns how many it removed.
  int sweep_workspaces();
  // Removes the logs of the oldest ended jobs while ended jobs' logs hold
  // more than logs_max_bytes together (the records stay). Returns how many.
  int sweep_logs();
  Result<LogRead> read_log(const JobId& job_id, uint64_t offset, size_t max_bytes);
  // Calls `ready` once, when the log grows past `offset` or the job ends
  // (at once if either is already true).
  Status watch_log(const JobId& job_id, uint64_t offset, std::function<void()> ready);
  Result<std::unique_ptr<exec::ExecSession>> exec(const JobId& job_id, const exec::ExecSpec& spec);
  // A TCP socket connected to 127.0.0.1:`port` inside the running job's
  // own network namespace (os/netns.h), for port forwarding without a relay
  // process. kPermissionDenied for gVisor jobs and without the
  // privilege to join namespaces: callers then fall back to exec().
  Result<int> connect(const JobId& job_id, uint16_t port);
  nlohmann::json executor_status();
  // What a consumer may see before it asks for a job (`yonder gpu PEER`):
  // {"inventory": gpu::to_json of the GPUs jobs are placed on, "leased":
  // {uuid: true} for those a job holds now, "shared": {uuid: {"jobs",
  // "vram_bytes"}} for those with shares on them, "shareable": {uuid:
  // {"max_jobs", "vram_bytes"}} for those gpu.share lends (the VRAM shares
  // may take in all), "limits": the per-job
  // maxima, "running", "queued", "max_concurrent", "max_per_peer"}; never
  // a job id or another peer's name. Blocking (NVML).
  nlohmann::json offer();
  const ProviderOptions& options() const { return options_; }
  // Called with the job's final view each time a job ends (for the audit
  // log), on the thread that settled it, under the manager's lock: it must
  // not call back into this manager.
  void set_on_finished(std::function<void(const nlohmann::json& view)> hook);

  // A job waiting in the queue, for a queue order policy.
  struct QueuedJob {
    std::string job_id;
    std::string peer_id;
    int64_t created_at = 0;  // Unix seconds
  };
  // Orders the waiting queue each time the scheduler looks at it (tit-for-tat
  // by the node's credits, jobs/metering/credits.h): returns the same job ids in the
  // order to serve them; ids it leaves out keep their place after the
  // others. Called under the manager's lock: it must not call back into
  // this manager. Unset (the default): first come, first served.
  void set_queue_order(std::function<std::vector<std::string>(const std::vector<QueuedJob>&)> order);
  // The queue's limits while it runs (jobs.max_per_peer, jobs.max_queued,
  // jobs.max_queued_per_peer, applied live): a raised per-peer limit lets
  // waiting jobs start at once; a lowered one stops nothing that runs.
  void set_limits(int max_per_peer, int max_queued, int max_queued_per_peer);

 private:
  struct Live;
  using LivePtr = std::shared_ptr<Live>;

  nlohmann::json view(const Live& job) const;
  Result<LivePtr> find(const JobId& job_id);
  Status save_locked(Live& job);
  void schedule();
  // One pass of queue_core.h over the queue: gathers the snapshot, decides,
  // applies the plan (SQLite, runner threads) under the lock.
  void schedule_locked(std::unique_lock<std::mutex>& lock);
  // The running jobs and, with `queue`, the queue and the resources it is
  // decided against (probed here: NVML, the volume), at `now`.
  // The state of each job `r` waits for (--after, --after-ok), for the queue core.
  std::vector<Dependency> dependencies_locked(const JobRecord& r) const;
  QueueSnapshot snapshot_locked(MonoTime now, bool queue);
  // Applies the plan's job actions in order (its timer actions are the
  // watchdog's). False when a start could not be saved: that job failed
  // and the rest of the plan was not applied, so the caller decides again.
  bool apply_locked(const QueuePlan& plan);
  void run(LivePtr job, bool recovered);
  void pump(LivePtr job, exec::TaskHandle handle);
  void finish_locked(const LivePtr& job, JobState state, const std::string& reason, const std::string& message,
                     std::optional<exec::ExitInfo> exit);
  void request_stop_locked(const LivePtr& job, const std::string& reason, const std::string& message);
  void notify_watchers_locked(Live& job);
  void watchdog(MonoTime started);
  void check_vram();
  // The shares placed now: {uuid: [{"job_id", "vram_bytes"}]}.
  nlohmann::json shares_locked() const;
  void recover_locked(const std::vector<JobRecord>& records, const std::vector<exec::OwnedTask>& owned);
  void reap_locked();
  // nullopt when the volume cannot be read (nothing is refused for it).
  std::optional<DiskSnapshot> disk_snapshot_locked();
  std::string workspace_image_of(const Live& job) const;
  // The workspace size promised to a job: its --disk, or the default.
  uint64_t disk_promise(const JobRecord& r) const;
  // The job's wall time: its terms', or jobs.default_wall_time_s for a row that has none.
  int64_t wall_time_s(const JobRecord& r) const {
    return r.terms.wall_time_s > 0 ? r.terms.wall_time_s : options_.limits.default_wall_time_s;
  }
  // When the next ended workspace passes its retention, on the steady face
  // read as `now` (at or before it once due), or max() when none waits.
  MonoTime next_sweep_locked(MonoTime now) const;
  Result<JobLog*> open_log_locked(Live& job);
  // Finished jobs keep their log open only while recently used: at most
  // kOpenFinishedLogs of them, least recently used closed first (one
  // descriptor per job ever run would run a long-lived provider out of them).
  void retire_logs_locked(const std::string& used);
  int64_t now_s() const;

  std::unique_ptr<JobStore> store_;
  exec::Executor& executor_;
  gpu::GpuInventory& inventory_;
  ProviderOptions options_;
  WaitableClock& clock_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable watch_cv_;
  std::map<std::string, LivePtr> jobs_;
  std::deque<std::string> queue_;
  std::deque<std::string> open_finished_logs_;  // least recently used first
  LeaseMap leases_;
  bool started_ = false;
  bool shutting_down_ = false;
  bool sweep_due_ = false;  // a job ended or its outputs went home: the watchdog sweeps workspaces
  std::string vram_watch_error_;
  std::thread watchdog_;
  std::vector<std::thread> finished_threads_;  // joined by reap_locked
  std::function<void(const nlohmann::json&)> on_finished_;
  std::function<std::vector<std::string>(const std::vector<QueuedJob>&)> queue_order_;
  // Wakes the watchdog when a manual clock moves; declared last, so it is
  // gone before the mutex and condition variable it touches.
  std::unique_ptr<WaitableClock::Subscription> clock_moved_;
};

}  // namespace yonder::jobs::provider
