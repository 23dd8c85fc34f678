// The mesh job supervisor's decisions (mesh/jobs/mesh_jobs.h), pure: the
// job's state and one event in, the job's state after it, the actions that
// follow and the next deadline out. It never touches a socket, a file, a
// thread, a timer or a clock: `now` comes in with each event (the steady
// clock's time_point, as in jobs/provider/queue_core.h, but nothing here
// reads it). MeshJobs builds a JobState from its live job, calls on_event(),
// takes the state back and does what the actions say (SQLite, leases,
// run.stop, the quorum's fetches), in their order.
//
// The policy (what MeshJobs has always done; kept, not redesigned). A job
// has K replicas (1 for a plain job), each a slot whose attempts run one
// after another, one provider each.
//
//  1. Silence. A running attempt whose provider has not answered for more
//     than mesh.provider_timeout (now > last answer + timeout, strictly) is
//     lost: it ends "lost" ("<provider> stopped answering for N s"), its
//     provider joins the slot's failed providers, the job there is asked to
//     stop (best effort) and the slot is requeued (rule 3). The next deadline
//     is the earliest last answer + timeout over the running attempts, and
//     the earliest placement retry (rule 4).
//  2. An attempt ends (its view came back exited, failed or stopped):
//       - a stop was requested: the job finishes "stopped" with that attempt;
//       - it answered (exited with 0, or exited with any code when K > 1):
//         K = 1 finishes "succeeded" with it; K > 1 settles the slot;
//       - else while the slot's ended attempts (exited, failed, stopped;
//         this one included) are at most the retries allowed: its provider
//         joins the failed ones and the slot is placed again;
//       - else K = 1 finishes "failed" with it, K > 1 gives the slot up.
//  3. Requeue (after a loss, or a submit that failed: "not started", its
//     provider joins the failed ones). The slot's requeues are its attempts
//     that were lost or not started; more than mesh.max_requeues gives the
//     slot up ("gave up after N providers lost or refused it (<last why>);
//     mesh.max_requeues is M"), else the slot is placed again.
//  4. Placement. One placement at a time per job: a slot asked to be placed
//     while a sibling's lease is in flight waits for it. The exclusions are
//     every sibling's provider (running or answered: replicas stay on
//     distinct providers) and, unless the slot was told to allow them, the
//     slot's failed providers. A lease that fails while failed providers
//     were excluded is tried again at once with them allowed. Otherwise:
//     a lone replica that never ran finishes "failed" (unplaced, with the
//     error's code); after more than mesh.max_requeues failed placements in
//     a row a lone replica finishes "failed" ("could not place it: ...",
//     unplaced) and a replica gives up; else it is placed again at
//     now + mesh.provider_timeout. A lease that lands resets the count and
//     the allowance.
//  5. Giving up a slot: K = 1 finishes "failed" with the reason; K > 1
//     settles the slot with no answer.
//  6. Settling: when every slot has settled (answered or given up), the
//     quorum is decided (mesh/jobs/mesh_jobs_quorum.cpp) once.
//  7. Stop: the job is marked stopping and every running attempt is asked
//     to stop (its end then finishes the job, rule 2); with none running
//     the job finishes "stopped" ("stopped before it ran").
//  8. A finished job takes no further decisions, so it finishes at most
//     once: every event after it is answered with no action, but for a
//     submit that fails on its way (the attempt is still marked "not
//     started" and the job saved).
//
// Pure and deterministic: the same state, event and `now` give the same
// step. Holds no state; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace yonder::mesh::supervisor {

using MonoTime = std::chrono::steady_clock::time_point;

enum class AttemptState { kPlacing, kUploading, kRunning, kExited, kFailed, kStopped, kLost, kNotStarted, kOther };
// The store's words ("not started", ...) and back; an unknown word is kOther.
AttemptState parse_attempt_state(const std::string& s);
std::string attempt_state_name(AttemptState s);
// exited, failed, stopped: the job itself ended (a retry when it fails).
bool job_ended(AttemptState s);

struct Settings {
  std::chrono::milliseconds provider_timeout{60'000};  // mesh.provider_timeout_s
  uint32_t max_requeues = 3;                           // mesh.max_requeues
};

struct Attempt {
  int replica = 0;
  std::string provider_id;
  std::string provider_name;
  AttemptState state = AttemptState::kUploading;
  std::optional<int> exit_code;
  std::string why;
  bool operator==(const Attempt&) const = default;
};

// Slot::current's values besides an index into JobState::attempts.
constexpr int kNoAttempt = -1;
constexpr int kPlacing = -2;  // a lease is in flight for it

struct Slot {
  int current = kNoAttempt;
  int answer = -1;                         // index of the attempt that answered
  bool settled = false;                    // answered or gave up
  std::set<std::string> failed_on;         // providers that lost or failed it
  bool allow_failed = false;               // nobody else could take it: try them again
  uint32_t placement_failures = 0;         // in a row
  std::optional<MonoTime> last_answer;     // of its running attempt's provider
  std::optional<MonoTime> place_again_at;  // a placement retry is pending
  bool operator==(const Slot&) const = default;
};

struct JobState {
  uint64_t retries_allowed = 0;  // --retries
  bool stopping = false;
  bool finished = false;
  bool deciding = false;          // the quorum was asked for
  std::vector<Attempt> attempts;  // in attempt order
  std::vector<Slot> slots;        // one per replica

  int replicas() const { return static_cast<int>(slots.size()); }
  bool operator==(const JobState&) const = default;
};

// ---- Events ----

// The attempt in flight of `replica` came back ended (exited, failed, stopped).
struct AttemptEnded {
  int replica = 0;
  AttemptState state = AttemptState::kFailed;
  std::optional<int> exit_code;
  std::string why;  // "" : "exited with N" when there is a code
};
// The running attempt's provider answered (or watching began).
struct ProviderAnswered {
  int replica = 0;
};
// Time passed for `replica`: has its provider been silent too long? Has its
// placement retry come due?
struct Tick {
  int replica = 0;
};
// The attempt in flight of `replica` did not start (lease, upload or submit failed).
struct SubmitFailed {
  int replica = 0;
  std::string why;
};
// Placing `replica` began (a lease was asked for).
struct PlacementStarted {
  int replica = 0;
};
// The lease for `replica` failed; `excluding_failed`: as placement_for said.
struct PlacementFailed {
  int replica = 0;
  bool excluding_failed = false;
  std::string message;
  std::string code;  // the error code's name
};
// The lease for `replica` landed: `attempt` (uploading) is appended and is the slot's current one.
struct Placed {
  int replica = 0;
  Attempt attempt;
};
struct StopRequested {};

using Event = std::variant<AttemptEnded, ProviderAnswered, Tick, SubmitFailed, PlacementStarted, PlacementFailed,
                           Placed, StopRequested>;

// ---- Actions ----

// Ask the provider job of attempt `attempt` (an index) to stop.
struct StopAttempt {
  int attempt = 0;
  bool operator==(const StopAttempt&) const = default;
};
// Save the job, then place `replica` (placement_for says how).
struct PlaceReplica {
  int replica = 0;
  bool save_first = true;  // false: place at once (a retry with the failed allowed)
  bool operator==(const PlaceReplica&) const = default;
};
// Place `replica` again at `at` (a placement retry; no save).
struct PlaceLater {
  int replica = 0;
  MonoTime at{};
  bool operator==(const PlaceLater&) const = default;
};
// Save the job (a slot settled).
struct SaveJob {
  bool operator==(const SaveJob&) const = default;
};
// Save the job, then gather the replicas' answers and decide the quorum.
struct DecideQuorum {
  bool operator==(const DecideQuorum&) const = default;
};
// The job ends. With `attempt` (an index): the result is that attempt's;
// else {"message", "exit_code": null}, "reason": "unplaced" when `unplaced`,
// "code" when not empty.
struct FinishJob {
  std::string state;  // succeeded, failed, stopped
  std::optional<int> attempt;
  std::string message;
  bool unplaced = false;
  std::string code;
  bool operator==(const FinishJob&) const = default;
};

using Action = std::variant<StopAttempt, PlaceReplica, PlaceLater, SaveJob, DecideQuorum, FinishJob>;

struct Step {
  JobState state;  // the job after the event: the caller's from now on
  std::vector<Action> actions;
  // The earliest of the running attempts' silence deadlines (last answer +
  // timeout: lost once now passes it) and the pending placement retries;
  // nullopt: none.
  std::optional<MonoTime> next_deadline;
};

Step on_event(const JobState& state, const Event& event, MonoTime now, const Settings& settings);

// The earliest pending deadline of `state` (as Step::next_deadline).
std::optional<MonoTime> next_deadline(const JobState& state, const Settings& settings);

// How to place `replica` now (rule 4): kNothing when the job finished, the
// slot settled or has an attempt or a lease in flight; kWait while a
// sibling's lease is in flight (place it once that one is over).
struct Placement {
  enum class What { kPlace, kWait, kNothing };
  What what = What::kNothing;
  std::set<std::string> exclude;
  bool excluding_failed = false;
  bool operator==(const Placement&) const = default;
};
Placement placement_for(const JobState& state, int replica);

}  // namespace yonder::mesh::supervisor
