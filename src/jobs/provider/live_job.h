// ProviderJobs' in-memory state of one job (private to the manager; every
// field is guarded by ProviderJobs::mutex_ except where noted).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jobs/provider/job_log.h"
#include "jobs/provider/job_store.h"
#include "jobs/provider/provider_jobs.h"

namespace yonder::jobs::provider {

// The share of a GPU a started job holds (its record's "share": the
// device and the VRAM budget), if it holds one. A share is not a lease:
// several jobs hold one device, so it is kept in the record's result, not
// in the store's lease rows.
std::optional<ShareHolding> held_share(const JobRecord& r);

struct Watcher {
  uint64_t offset = 0;
  std::function<void()> ready;
};

struct ProviderJobs::Live {
  JobRecord rec;
  // Opened when the job starts (or a finished job's log is read); the pump
  // writes it without the lock. Readers hold a copy while they read, so a
  // finished job's log can be closed (ProviderJobs::retire_logs_locked)
  // while one is still reading it.
  std::shared_ptr<JobLog> log;
  // What view() shows once a finished job's log is closed again.
  uint64_t closed_log_bytes = 0;
  bool closed_log_truncated = false;
  std::thread runner;           // start, wait, clean up
  std::thread pump;             // executor logs -> log; joined by the runner
  std::thread stopper;          // executor stop; joined by the runner
  std::shared_ptr<exec::Cancel> wait_cancel;
  std::shared_ptr<exec::Cancel> pump_cancel;
  std::string stop_reason;      // set once: "stopped", "wall_time", "vram_exceeded"
  std::string stop_message;
  std::optional<MonoTime> deadline;  // wall time, on the manager's steady clock, while running
  std::vector<Watcher> watchers;
  bool pump_done = false;
  uint64_t pump_entries = 0;    // entries the pump has delivered; the runner waits while it grows
  bool pump_cut = false;        // the runner gave up waiting for the pump (it is cancelled)
  std::string log_lost;         // set when output could not be written (disk full); "" when the log is whole
  bool unsaved_end = false;     // its final state is not in the database yet (disk full): the watchdog retries
  std::condition_variable pump_cv;
  std::atomic<bool> runner_done{false};  // set by the runner as its last act
  // workspace_digest.h: the files the job created or changed, set by the
  // runner (under the lock) before finish_locked; "" when it had no workspace.
  std::string files_digest;
};

}  // namespace yonder::jobs::provider
