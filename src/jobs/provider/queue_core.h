// The provider's job queue, decided: a pure function from a snapshot of the
// queue, the running jobs and the resources to the actions that follow and
// the next time it must be asked again. It never touches a socket, a file,
// a thread, a lock or a clock: `now` comes in with the snapshot (the time
// type is the steady clock's time_point, as in net/link/mux.h, but nothing
// here reads it). ProviderJobs (provider_jobs.h) gathers the snapshot under
// its lock, calls plan_queue(), and does what the plan says (SQLite, the
// executor, threads), in the plan's order.
//
// The policy (what ProviderJobs has always done; kept, not redesigned):
//
//  1. Order. The queue is in submit order. When a queue order policy is set
//     (ProviderJobs::set_queue_order: the node's credits), the ids it names
//     come first in its order (unknown ids and repeats ignored), the rest
//     after them in their old order. That order is the queue's from then on.
//  2. One pass, front to back, while fewer than `max_concurrent` jobs are
//     starting or running; jobs behind that point are not looked at (their
//     last "waiting for" stays). For each job, in this order:
//       - its peer already has as many jobs starting or running as it may:
//         `max_per_peer`, or the job's `peer_limit` (the peer's scope,
//         `--max-jobs`) when that is smaller: it waits, the reason naming
//         which limit and how to raise it. A peer over its limit is never
//         refused for it: its jobs wait their turn, like Slurm's pending;
//         only the queue's size limits are refusals (at submit);
//       - disk (when the snapshot has a disk): disk_budget.h's decide_disk
//         on its workspace promise. Never: refused. Later: it waits;
//       - GPUs (when it asks for any): pick_gpus (gpu_leases.h), the first
//         free devices in inventory order with enough memory (a device with
//         shares on it is not free). Never: refused. Later: it waits, and
//         the devices it will get are held back from new shares
//         (reserve_for_whole, gpu_shares.h), so a stream of shares cannot
//         starve it;
//       - a share of a GPU (when it asks for one): pick_share (gpu_shares.h),
//         best fit by VRAM on the devices gpu.share lends, never on one
//         leased whole or held back for a whole-GPU job that waits ahead of
//         it, never past a device's capacity or its number of shares.
//         Never: refused. Later: it waits;
//       - else it starts on those devices; its slot, its peer's count, its
//         devices and its disk promise count against the jobs after it.
//     Before that pass, and for every queued job whatever the capacity: a
//     held job (`run --hold`, `yonder hold`) waits until released; a job
//     with dependencies (`--after JOB`: JOB has ended, however;
//     `--after-ok JOB`: JOB exited 0) waits while one is unmet, and one
//     whose `--after-ok` job ended otherwise (or is gone) can never start:
//     it leaves the queue, failed with reason "dependency_failed". Neither
//     holds a slot or a device while it waits, so the jobs behind it go on.
//  3. FIFO with backfill and no reservation: a job that waits keeps its
//     place but holds nothing, so the jobs behind it that fit start now.
//     The head of the queue is never passed over for a later job: it is
//     decided first, against everything free, so a job behind it can only
//     take what the head could not use. But a job that asks for much (two
//     GPUs, a big disk) can wait while smaller jobs behind it keep taking
//     each device as it frees; nothing reserves the devices for it. The
//     queue order policy is the lever on that, not this function.
//  4. Refusal is for good: "never fits" means this provider can never run
//     the job as asked (more GPUs or memory than it has, more disk than the
//     volume can ever give), and the reason says what to ask for instead.
//     A job is never refused for what other jobs hold.
//  5. Deadlines (the watchdog's half): a running job that is not already
//     stopping is stopped once `now` reaches its wall-time deadline. VRAM
//     is sampled when its time comes while a running job has a VRAM limit
//     on leased devices; ended workspaces and logs are swept when asked for
//     or when their time comes. The plan's next deadline is the earliest of
//     what is still pending: the caller sleeps until then or until
//     something happens (a job ends, a submit, a stop).
//
// A snapshot need not hold every part: the scheduler passes the queue and
// the resources; the watchdog passes the running jobs and its timers. Each
// part is decided only when present.
//
// Pure and deterministic: the same snapshot gives the same plan, whatever
// the order of `active`; the order of `queue` and of the devices matters.
// Not thread-safe in any sense that matters: it holds no state.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "jobs/provider/disk_budget.h"
#include "jobs/provider/gpu_leases.h"
#include "jobs/provider/gpu_shares.h"

namespace yonder::jobs::provider {

using MonoTime = std::chrono::steady_clock::time_point;

// A job another waits for (`--after`, `--after-ok`), as it stands now.
struct Dependency {
  enum class State {
    kPending,    // not ended yet (queued, starting, running)
    kSucceeded,  // exited 0
    kFailed,     // ended otherwise: a non-zero exit, stopped, failed
    kGone,       // not known here any more
  };
  std::string job_id;
  bool ok_only = false;  // --after-ok: only success will do
  State state = State::kPending;
  std::string how;       // for a failed one: how it ended ("exited with 3"), for the message

  bool operator==(const Dependency&) const = default;
};

// A job waiting in the queue, with what it asks for.
struct WaitingJob {
  std::string job_id;
  std::string peer_id;
  int gpus = 0;
  uint64_t vram_bytes = 0;  // per GPU: devices with less memory do not count
  uint64_t disk_bytes = 0;  // its workspace promise (--disk, or the default)
  int peer_limit = 0;       // its peer's jobs at once by the scope it was submitted under; 0: none
  bool held = false;        // `run --hold` / `yonder hold`: not started until released
  std::vector<Dependency> after;
  std::optional<ShareRequest> share;  // a share of one GPU instead of whole ones (gpus is then 0)

  bool operator==(const WaitingJob&) const = default;
};

// A job starting or running: it holds a slot, its peer's count, its devices.
struct ActiveJob {
  std::string job_id;
  std::string peer_id;
  bool running = false;              // false: starting (no deadline yet)
  bool stopping = false;             // a stop was asked for already
  std::optional<MonoTime> deadline;  // its wall time, once running
  int64_t wall_time_s = 0;           // for the stop message
  std::vector<std::string> gpu_uuids;
  bool vram_limited = false;         // has a VRAM limit to watch on its devices
  uint64_t share_vram_bytes = 0;     // > 0: a share of its one device with this budget, not the whole device

  bool operator==(const ActiveJob&) const = default;
};

struct QueueSnapshot {
  MonoTime now{};
  int max_concurrent = 4;  // starting + running, all peers
  int max_per_peer = 2;
  std::vector<WaitingJob> queue;  // in the queue's order
  // The queue order policy's answer for this pass; nullopt: none set.
  std::optional<std::vector<std::string>> preferred_order;
  std::vector<ActiveJob> active;
  // The devices as probed; needed once a job that asks for GPUs is
  // decided (without it such a job waits).
  std::optional<GpuView> gpus;
  // gpu.share: the devices lent as shares; empty: none.
  std::vector<ShareConfig> gpu_shares;
  // The workspace volume; nullopt: disk is not accounted (or the volume
  // could not be read), and no job waits or is refused for disk.
  std::optional<DiskSnapshot> disk;
  // The watchdog's timers. nullopt: not pending.
  std::optional<MonoTime> vram_sample_at;
  std::optional<MonoTime> sweep_at;
  bool sweep_requested = false;  // a job ended or its outputs went home
};

// Start the job on these devices (none for a CPU job).
struct StartJob {
  std::string job_id;
  std::vector<std::string> gpu_uuids;  // in inventory order
  std::string gpu_model;               // the devices' distinct models, "+"-joined, at most 64 bytes
  uint64_t share_vram_bytes = 0;       // > 0: a share of its one device, with this VRAM budget
  uint32_t share_permille = 0;         // with a share: what part of the device it is (metering)
  bool operator==(const StartJob&) const = default;
};
// It stays in the queue, for this reason (shown as "waiting_for").
struct WaitJob {
  std::string job_id;
  std::string reason;
  bool operator==(const WaitJob&) const = default;
};
// It can never run here: it leaves the queue, failed with reason `code`
// ("never_fits", "dependency_failed") and this message.
struct RefuseJob {
  std::string job_id;
  std::string reason;
  std::string code = "never_fits";
  bool operator==(const RefuseJob&) const = default;
};
// Stop it (SIGTERM, grace, SIGKILL), ending with `reason` and `message`.
struct StopJob {
  std::string job_id;
  std::string reason;  // "wall_time"
  std::string message;
  bool operator==(const StopJob&) const = default;
};
// Sample the devices' per-process memory (the VRAM watch).
struct SampleVram {
  bool operator==(const SampleVram&) const = default;
};
// Take back ended workspaces and logs past their retention or cap.
struct SweepDisk {
  bool operator==(const SweepDisk&) const = default;
};

using QueueAction = std::variant<StopJob, StartJob, WaitJob, RefuseJob, SweepDisk, SampleVram>;

struct QueuePlan {
  // The queue in the order this pass decided it (after the policy's order),
  // before its starts and refusals: the caller's queue from now on, less
  // what the actions take out of it.
  std::vector<std::string> order;
  // Stops (by job id), then the queue's decisions in `order`, then a
  // sweep, then a VRAM sample. Apply in this order.
  std::vector<QueueAction> actions;
  // What is left queued after the actions, in order.
  std::vector<std::string> queue;
  // The earliest pending deadline, wall time or timer; nullopt: none, call
  // again when something happens.
  std::optional<MonoTime> next_deadline;

  bool operator==(const QueuePlan&) const = default;
};

QueuePlan plan_queue(const QueueSnapshot& snapshot);

// Policy rule 1 alone: `queue` reordered by `preferred`.
std::vector<std::string> merge_order(const std::vector<std::string>& queue, const std::vector<std::string>& preferred);

}  // namespace yonder::jobs::provider
