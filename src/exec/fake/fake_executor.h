// TEST DOUBLE. FakeExecutor is an in-memory exec::Executor for tests only:
// it runs nothing. Each task follows a script (what it prints and when, how
// it ends, what it does with a signal, whether its container vanishes) in
// the time of an injected ManualClock, so the code above the executor (the
// provider's queue, recovery after a restart, the mesh supervisor) can be
// unit-tested without dockerd, without real time and without sleeps. It
// passes the same contract suite as the Docker and Podman backends
// (tests/exec/executor_contract.h), which is what makes a test against it
// worth trusting; never link it into the daemon.
//
// Time. Nothing happens until the clock moves: advance() moves the clock
// and lets every task reach that time (lines written, exits, kills at the
// end of a stop's grace, losses), then wakes every blocked caller. wait(),
// stop(), logs(follow) and exec reads block on a condition variable until
// that happens (or their CancelSlot fires). With `auto_advance`, a caller
// that would block jumps the clock to the next scripted event instead, the
// way a paused test clock does in tokio or Go's synctest: straight-line
// single-threaded tests then need no second thread. Leave it off when
// several threads use the executor and the test decides when time passes.
//
// A "restart" of the code under test is a new instance of that code over
// the same FakeExecutor (which plays the engine, and keeps its tasks):
// recover() and list_owned() then find what the first instance started.
//
// Threading: every call is safe from several threads at once (one mutex,
// one condition variable). Sinks and exec reads are called without the
// lock held, so they may call back into the executor. The clock is read and
// moved only under the executor's lock: while other threads use the
// executor, move time with advance(), not on the clock itself, and read it
// with now(). The clock must outlive the executor and its exec sessions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "exec/executor.h"
#include "exec/image_policy.h"

namespace yonder::exec::fake {

// One line a task writes, `at` after its start. `text` is written as is
// (add the '\n' yourself); a task with a TTY writes it on kStdout with
// "\r\n" line ends, as a terminal does.
struct ScriptedLine {
  std::chrono::nanoseconds at{0};
  LogStream stream = LogStream::kStdout;
  std::string text;
};

// What one task does. The default runs until it is stopped, prints nothing
// and ends with 128 + signal at the first signal.
struct TaskScript {
  std::vector<ScriptedLine> output{};
  // Ends by itself `exit_after` its start, with `exit_code`; nullopt: runs
  // until stopped.
  std::optional<std::chrono::nanoseconds> exit_after{};
  int exit_code = 0;
  // The end at exit_after is the kernel's OOM killer: exit code 137 and
  // ExitInfo::oom_killed, as Docker reports it (exit_code is ignored).
  bool oom_kill = false;
  // Catchable signals (SIGTERM, SIGINT, ...) are ignored, as by a trap:
  // only SIGKILL, or a stop's kill at the end of its grace, ends it.
  bool ignores_signals = false;
  // How long the task takes to end after a signal it honours (its cleanup).
  std::chrono::nanoseconds signal_exit_delay{0};
  // The container vanishes this long after the start (someone ran
  // `docker rm -f`, the engine lost its state): inspect and recover say
  // kMissing, list_owned no longer has it, wait and logs fail.
  std::optional<std::chrono::nanoseconds> lost_after{};
  // start() fails with this error and leaves nothing behind.
  std::optional<Error> start_error{};
  // What stats() answers while the task runs.
  TaskStats stats{64ull << 20, 0, 1};
};

// A command run with exec(): it writes `output` at once, then (with
// `echo_stdin`) echoes what is written to it until stdin is closed, then
// ends with `exit_code`. Takes no time.
struct ExecScript {
  std::vector<std::pair<LogStream, std::string>> output{};
  int exit_code = 0;
  bool echo_stdin = false;
};

struct FakeOptions {
  // What fingerprint() answers; check() refuses GPU jobs unless
  // gpu_capable (or simulate_gpus) and gVisor jobs unless "runsc" is in
  // runtimes, with the same error codes as the Docker backend.
  Fingerprint fingerprint = default_fingerprint();
  // Images are checked like the real backends do; nullopt allows any.
  std::optional<ImagePolicy> images{};
  // The script of a task started for a job nobody scripted.
  TaskScript default_script{};
  // Blocked callers move the clock to the next scripted event (see above).
  bool auto_advance = false;
  // The first host pid handed out; above Linux's pid_max (2^22) so no
  // real process ever has one.
  int first_pid = 5'000'000;

  static Fingerprint default_fingerprint();
};

// A destroy() call, as the test may want to check what was asked.
struct DestroyCall {
  std::string job_id;
  std::string task_id;
  bool remove_workspace = false;
};

class FakeExecutor final : public Executor {
 public:
  explicit FakeExecutor(ManualClock& clock, FakeOptions options = {});
  ~FakeExecutor() override;
  FakeExecutor(const FakeExecutor&) = delete;
  FakeExecutor& operator=(const FakeExecutor&) = delete;

  // --- Scripting and time (the test's side) ---

  // The script of the next task started for `job_id` (used once).
  void script(const std::string& job_id, TaskScript script);
  // The script of every exec of `command` (in any task).
  void script_exec(const std::vector<std::string>& command, ExecScript script);
  // Moves the clock by `d` and lets every task reach the new time.
  void advance(std::chrono::nanoseconds d);
  // Moves the clock to the earliest scripted event still ahead (a line,
  // an exit, a kill at a grace's end, a loss); false when there is none.
  bool advance_to_next_event();
  // The clock's time, read under the executor's lock.
  TimePoint now() const;
  // The task's container vanishes now (see TaskScript::lost_after).
  // False when there is no such task.
  bool lose(const std::string& task_id);
  // Blocks until at least `n` callers are blocked in wait, stop, logs or
  // an exec read (so a test knows a call is parked before it moves time);
  // false when that does not happen within `real_timeout` of real time (a
  // guard against a test that would hang, not a pacing).
  bool wait_for_blocked(int n, std::chrono::milliseconds real_timeout = std::chrono::seconds(30));
  // Another process of a running task (a child it forked), for owns_pid.
  Result<int> add_process(const TaskHandle& handle);
  void set_stats(const std::string& task_id, TaskStats stats);

  // --- What the code under test did ---

  std::vector<TaskSpec> started() const;        // specs of successful starts, in order
  std::vector<DestroyCall> destroyed() const;   // destroy() calls, in order
  std::vector<std::pair<std::string, int>> signals() const;  // (task id, signal) as delivered by signal/stop

  // --- exec::Executor ---

  Fingerprint fingerprint() override;
  Status check(const TaskSpec& spec) override;
  Result<TaskHandle> start(const TaskSpec& spec) override;
  Result<TaskStatus> recover(const TaskHandle& handle) override;
  Result<ExitInfo> wait(const TaskHandle& handle, const CancelSlot& on_cancel) override;
  Status stop(const TaskHandle& handle, int signal, std::chrono::seconds grace) override;
  Status signal(const TaskHandle& handle, int signal) override;
  Status destroy(const TaskHandle& handle, bool remove_workspace) override;
  Result<TaskStatus> inspect(const TaskHandle& handle) override;
  Result<TaskStats> stats(const TaskHandle& handle) override;
  Result<std::unique_ptr<ExecSession>> exec(const TaskHandle& handle, const ExecSpec& spec) override;
  Status logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
              const CancelSlot& on_cancel) override;
  Result<std::vector<OwnedTask>> list_owned() override;
  Status remove_task(const std::string& task_id) override;
  bool owns_pid(const TaskHandle& handle, int pid) override;

  // The engine state shared with cancel tokens and exec sessions, which may
  // outlive a call (defined in fake_executor.cpp).
  struct World;

 private:
  std::shared_ptr<World> world_;
};

}  // namespace yonder::exec::fake
