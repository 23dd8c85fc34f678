// Array jobs: the pure bookkeeping of one array of independent
// tasks spread over the mesh. No I/O, no clock (every call takes now_ms).
//
// The driver (the consumer's daemon, or a simulation) asks `next()` what to
// start, places each launch with the mesh scheduler (avoiding the providers
// the launch names), reports `started()`, and later `finished()` with the
// outcome. The array decides:
//   - at most `limit` attempts run at once (speculative copies included);
//   - a task that failed is tried again on another provider, at most
//     `retries` more times; a task whose provider was lost is tried again
//     up to `max_losses` times (a loss is not the task's fault, but a task
//     that kills every provider it lands on must not loop forever);
//   - near the end (nothing left to start) a running attempt that has run
//     `straggler_factor` times the median task time so far gets one
//     speculative copy on another provider, at most `max_speculative` at
//     once; the first success wins, the other attempt's result is discarded
//     (`finished()` returns kDiscarded) and the driver stops it;
//   - the first success of a task is its result, exactly once; ties cannot
//     arise because the driver reports outcomes one at a time, in order.
//
// Tasks are indices 0..tasks-1; a parameter line per task (--array-file) is
// the driver's business.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

struct ArraySpec {
  uint32_t tasks = 0;             // 1 .. kMaxArrayTasks
  uint32_t limit = 0;             // at most this many attempts at once; 0 = no limit
  uint32_t retries = 0;           // failed tries after the first, per task
  uint32_t max_losses = 3;        // provider losses tolerated per task
  uint32_t max_speculative = 2;   // speculative copies running at once
  double straggler_factor = 3.0;  // runtime over the median that makes a straggler
  UnixMs min_straggler_ms = 10'000;  // never speculate on a task younger than this
};

inline constexpr uint32_t kMaxArrayTasks = 1'000'000;

// Parses "0-4999" or "0-4999%8" (Slurm's form; the first index must be 0)
// into tasks (B + 1) and limit.
Status parse_array_range(const std::string& text, ArraySpec& spec);

enum class TaskState : uint8_t { kPending, kRunning, kDone, kFailed };
const char* task_state_name(TaskState s);

enum class AttemptOutcome : uint8_t { kSucceeded, kFailed, kLost, kStopped };

struct ArrayLaunch {
  uint32_t task = 0;
  uint64_t attempt = 0;
  std::set<PeerKey> avoid;  // providers this task failed on, was lost on, or runs on
  bool speculative = false;
};

struct ArrayCounts {
  uint32_t pending = 0, running = 0, done = 0, failed = 0;
  uint32_t attempts_running = 0, speculative_running = 0;
  uint64_t retried = 0, lost = 0, discarded = 0;
};

class ArrayRun {
 public:
  explicit ArrayRun(ArraySpec spec);

  const ArraySpec& spec() const { return spec_; }

  // What to start now, at most `capacity` launches (the free slots the
  // driver can place; the array's own limit applies on top). Attempt ids
  // are handed out here; a launch the driver could not place goes back
  // with `unplaced()` (also after it started, when its provider went and
  // nobody else would take it): not the task's fault, it waits to run again.
  std::vector<ArrayLaunch> next(UnixMs now, size_t capacity);
  void unplaced(uint64_t attempt);
  // The launch is running on `provider`.
  Status started(uint64_t attempt, const PeerKey& provider, UnixMs now);

  enum class Verdict : uint8_t {
    kResult,     // this success is the task's result
    kDiscarded,  // the task already had its result: drop this one
    kRetry,      // the task goes back to pending (tried again elsewhere)
    kFailed,     // the task failed for good
    kIgnored,    // unknown or already finished attempt
  };
  // The attempt ended. `result` (e.g. an output digest) is kept for a success.
  Verdict finished(uint64_t attempt, AttemptOutcome outcome, UnixMs now, const std::string& result = {});
  // Every attempt running on `provider` is lost.
  std::vector<std::pair<uint64_t, Verdict>> provider_lost(const PeerKey& provider, UnixMs now);
  // The other attempts of a task that has its result: the driver stops them
  // (and then reports them kStopped).
  std::vector<uint64_t> redundant_attempts() const;

  // After a restart: task `task` (pending in the restored state) has an
  // attempt still running somewhere; it gets a new attempt id, provider
  // unknown until started().
  Result<uint64_t> adopt(uint32_t task, UnixMs now);
  // A done task whose result could not be collected (its provider vanished
  // before the outputs came home) runs again; its result is dropped.
  Status reopen(uint32_t task);
  // `retry --failed`: failed tasks become pending with fresh tries.
  uint32_t retry_failed();
  // Cancel: nothing more starts; running attempts are the driver's to stop.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  bool complete() const;  // every task done or failed (or cancelled and nothing runs)
  ArrayCounts counts() const;
  TaskState state(uint32_t task) const { return tasks_.at(task).state; }
  const std::string& result(uint32_t task) const { return tasks_.at(task).result; }
  std::optional<uint32_t> task_of(uint64_t attempt) const;
  std::optional<PeerKey> provider_of(uint64_t attempt) const;
  // Per provider: tasks whose result it produced.
  std::map<PeerKey, uint32_t> results_by_provider() const;
  // Median run time of successful attempts so far (0 before the first).
  UnixMs median_task_ms() const;
  // Estimated time left: remaining tasks x median / effective parallelism.
  UnixMs estimate_left_ms(UnixMs now) const;

  // Persistence: the array's tasks (state, tries, result, provider of the
  // result) as JSON. Running attempts are not kept: a restored array starts
  // them again unless the driver re-attaches (restore(..., running)).
  nlohmann::json to_json() const;
  static Result<ArrayRun> from_json(const nlohmann::json& j);

 private:
  struct Task {
    TaskState state = TaskState::kPending;
    uint32_t failures = 0, losses = 0;
    std::set<PeerKey> avoid;
    std::vector<uint64_t> running;  // attempt ids
    std::string result;
    std::optional<PeerKey> result_by;
    UnixMs done_at = 0;
  };
  struct Attempt {
    uint32_t task = 0;
    std::optional<PeerKey> provider;
    UnixMs started = 0;
    bool speculative = false;
  };
  static Result<ArrayRun> from_json_unchecked(const nlohmann::json& j);
  Verdict end_attempt(uint64_t attempt, AttemptOutcome outcome, UnixMs now, const std::string& result);
  size_t budget(size_t capacity) const;

  ArraySpec spec_;
  std::vector<Task> tasks_;
  std::set<uint32_t> pending_;  // ordered: lowest index first
  std::map<uint64_t, Attempt> attempts_;
  uint64_t next_attempt_ = 1;
  uint32_t speculative_running_ = 0;
  uint64_t retried_ = 0, lost_ = 0, discarded_ = 0;
  std::vector<UnixMs> durations_;  // successful attempts' run times, for the median
  mutable UnixMs median_ms_ = 0;   // recomputed when durations_ grew by an eighth
  mutable size_t median_of_ = 0;
  UnixMs first_start_ = 0;
  bool cancelled_ = false;
};

}  // namespace yonder::mesh
