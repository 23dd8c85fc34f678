// The test double's engine: tasks as records that move through their
// scripts when the clock moves. Every public call takes the world's lock,
// first lets the tasks reach the clock's time (settle), and wakes blocked
// callers (notify_all) after any change they could be waiting for.
#include "exec/fake/fake_executor.h"

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>

namespace yonder::exec::fake {
namespace {

int64_t unix_ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// What a terminal does to a program's line ends.
std::string as_terminal(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

Error task_missing(const std::string& task_id) {
  return make_error(ErrorCode::kNotFound, "no fake task " + task_id + " (destroyed, removed or lost)");
}

}  // namespace

// The world's records; named (not anonymous) because World, declared in
// the header, holds them.
namespace detail {

struct Entry {
  LogStream stream;
  int64_t unix_ns;
  std::string text;
};

struct Task {
  TaskHandle handle;
  TaskScript script;
  bool tty = false;
  TimePoint started_at;
  TaskState state = TaskState::kRunning;
  ExitInfo exit;
  int pid = 0;
  std::vector<int> children;
  size_t next_line = 0;        // the first line of script.output not written yet
  std::vector<Entry> log;      // what it has written, in order
  std::optional<TimePoint> signal_exit_at;  // a signal it honours ends it then
  int signal_exit_code = 0;
  std::optional<TimePoint> kill_at;         // the kill at the end of a stop's grace
  TaskStats stats;

  std::optional<TimePoint> next_line_at() const {
    if (state != TaskState::kRunning || next_line >= script.output.size()) return std::nullopt;
    return started_at + script.output[next_line].at;
  }
  std::optional<TimePoint> lost_at() const {
    if (!script.lost_after) return std::nullopt;
    return started_at + *script.lost_after;
  }
};

// How a running task ends next, and when; at the same time its own exit
// comes before a signal's, a signal's before the kill.
struct Ending {
  TimePoint at;
  ExitInfo exit;
  bool killed = false;
};
std::optional<Ending> next_ending(const Task& t) {
  if (t.state != TaskState::kRunning) return std::nullopt;
  std::optional<Ending> e;
  auto consider = [&](std::optional<TimePoint> at, ExitInfo exit, bool killed) {
    if (at && (!e || *at < e->at)) e = Ending{*at, std::move(exit), killed};
  };
  if (t.script.exit_after) {
    consider(t.started_at + *t.script.exit_after,
             t.script.oom_kill ? ExitInfo{137, true, "", ""} : ExitInfo{t.script.exit_code, false, "", ""}, false);
  }
  consider(t.signal_exit_at, ExitInfo{t.signal_exit_code, false, "", ""}, false);
  consider(t.kill_at, ExitInfo{137, false, "", ""}, true);
  return e;
}

}  // namespace detail

using detail::Ending;
using detail::Entry;
using detail::Task;
using detail::next_ending;

struct FakeExecutor::World {
  World(ManualClock& c, FakeOptions o) : clock(c), options(std::move(o)), next_pid(options.first_pid) {}

  mutable std::mutex mutex;
  std::condition_variable changed;  // anything a blocked caller may wait for
  ManualClock& clock;
  const FakeOptions options;
  std::map<std::string, Task> tasks;               // by task id; ids sort in start order
  std::map<std::string, TaskScript> scripts;       // by job id, for the next start
  std::map<std::vector<std::string>, ExecScript> exec_scripts;
  uint64_t next_task = 1;
  int next_pid;
  int blocked = 0;  // callers parked in block()
  std::vector<TaskSpec> started;
  std::vector<DestroyCall> destroyed;
  std::vector<std::pair<std::string, int>> signals;

  // Lets every task reach the clock's time: lines are written, tasks end
  // and vanish, in the order of their times.
  void settle() {
    const TimePoint now = clock.now();
    for (auto it = tasks.begin(); it != tasks.end();) {
      if (settle_task(it->second, now)) {
        it = tasks.erase(it);
      } else {
        ++it;
      }
    }
  }

  // True when the task vanished (the caller erases it).
  bool settle_task(Task& t, TimePoint now) {
    while (true) {
      auto line = t.next_line_at();
      auto ending = next_ending(t);
      auto lost = t.lost_at();
      // Earliest first; at one time a line, then the end, then the loss.
      enum class Kind { kNone, kLine, kEnd, kLost } what = Kind::kNone;
      TimePoint when{};
      auto consider = [&](std::optional<TimePoint> at, Kind kind) {
        if (at && *at <= now && (what == Kind::kNone || *at < when)) {
          what = kind;
          when = *at;
        }
      };
      consider(line, Kind::kLine);
      consider(ending ? std::optional<TimePoint>(ending->at) : std::nullopt, Kind::kEnd);
      consider(lost, Kind::kLost);
      switch (what) {
        case Kind::kNone:
          return false;
        case Kind::kLost:
          return true;
        case Kind::kLine: {
          const ScriptedLine& l = t.script.output[t.next_line++];
          t.log.push_back(t.tty ? Entry{LogStream::kStdout, unix_ns(when), as_terminal(l.text)}
                                : Entry{l.stream, unix_ns(when), l.text});
          break;
        }
        case Kind::kEnd:
          t.state = TaskState::kExited;
          t.exit = ending->exit;
          t.pid = 0;
          t.children.clear();
          if (ending->killed) signals.emplace_back(t.handle.task_id, SIGKILL);
          break;
      }
    }
  }

  // The earliest scripted event after now, of any task.
  std::optional<TimePoint> next_event() const {
    std::optional<TimePoint> next;
    auto consider = [&](std::optional<TimePoint> at) {
      if (at && (!next || *at < *next)) next = at;
    };
    for (const auto& [id, t] : tasks) {
      consider(t.next_line_at());
      if (auto e = next_ending(t)) consider(e->at);
      consider(t.lost_at());
    }
    return next;
  }

  void move_to(TimePoint t) {
    if (t > clock.now()) clock.advance(t - clock.now());
    settle();
    changed.notify_all();
  }

  enum class Wake { kDone, kDeadline, kCancelled };
  // Parks the caller (holding `lock`) until done() holds, the clock reaches
  // `deadline`, or *cancelled is set; with auto_advance, moves the clock
  // to the next event instead of parking while there is one.
  template <class Done>
  Wake block(std::unique_lock<std::mutex>& lock, Done done, std::optional<TimePoint> deadline, const bool* cancelled) {
    ++blocked;
    changed.notify_all();  // wait_for_blocked
    Wake wake;
    while (true) {
      if (done()) {
        wake = Wake::kDone;
        break;
      }
      if (cancelled != nullptr && *cancelled) {
        wake = Wake::kCancelled;
        break;
      }
      if (deadline && clock.now() >= *deadline) {
        wake = Wake::kDeadline;
        break;
      }
      if (options.auto_advance) {
        auto next = next_event();
        if (deadline && (!next || *deadline < *next)) next = deadline;
        if (next) {
          move_to(*next);
          continue;
        }
      }
      changed.wait(lock);
    }
    --blocked;
    return wake;
  }

  Task* find(const std::string& task_id) {
    auto it = tasks.find(task_id);
    return it == tasks.end() ? nullptr : &it->second;
  }

  // Delivers `sig` to a running task (the caller settles and notifies).
  void deliver(Task& t, int sig) {
    signals.emplace_back(t.handle.task_id, sig);
    const TimePoint now = clock.now();
    if (sig == SIGKILL) {
      if (!t.kill_at || now < *t.kill_at) t.kill_at = now;
      return;
    }
    if (t.script.ignores_signals) return;
    TimePoint at = now + t.script.signal_exit_delay;
    if (!t.signal_exit_at || at < *t.signal_exit_at) {
      t.signal_exit_at = at;
      t.signal_exit_code = 128 + sig;
    }
  }
};

namespace {

// Wakes the call it was handed to; guarded by the world's lock.
class FakeCancel final : public Cancel {
 public:
  explicit FakeCancel(std::shared_ptr<FakeExecutor::World> world) : world_(std::move(world)) {}
  void cancel() override {
    std::lock_guard lock(world_->mutex);
    cancelled_ = true;
    world_->changed.notify_all();
  }
  const bool* flag() const { return &cancelled_; }  // read under the world's lock

 private:
  std::shared_ptr<FakeExecutor::World> world_;
  bool cancelled_ = false;
};

// A scripted exec process. It ends when its script says, or when its task
// ends or vanishes (the engine kills a container's exec processes with it).
class FakeExecSession final : public ExecSession {
 public:
  FakeExecSession(std::shared_ptr<FakeExecutor::World> world, std::string task_id, ExecScript script, bool tty)
      : world_(std::move(world)), task_id_(std::move(task_id)), script_(std::move(script)), tty_(tty) {
    for (auto& [stream, text] : script_.output) push(stream, text);
  }

  Status write(std::string_view bytes) override {
    std::lock_guard lock(world_->mutex);
    if (cancelled_) return make_error(ErrorCode::kUnavailable, "the exec session was cancelled");
    if (stdin_closed_) return make_error(ErrorCode::kFailedPrecondition, "the exec process's stdin is closed");
    if (script_.echo_stdin && !task_gone()) push(LogStream::kStdout, bytes);
    world_->changed.notify_all();
    return ok_status();
  }

  void close_stdin() override {
    std::lock_guard lock(world_->mutex);
    stdin_closed_ = true;
    world_->changed.notify_all();
  }

  Result<std::optional<std::pair<LogStream, std::string>>> read(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(world_->mutex);
    world_->settle();
    auto wake = world_->block(lock, [&] { return !pending_.empty() || ended(); }, world_->clock.now() + timeout,
                              &cancelled_);
    if (wake == World::Wake::kCancelled) return make_error(ErrorCode::kUnavailable, "the exec session was cancelled");
    if (wake == World::Wake::kDeadline) {
      return make_error(ErrorCode::kUnavailable, "timed out waiting for the exec process's output");
    }
    if (pending_.empty()) return std::optional<std::pair<LogStream, std::string>>();
    auto front = std::move(pending_.front());
    pending_.erase(pending_.begin());
    return std::optional<std::pair<LogStream, std::string>>(std::move(front));
  }

  Status resize(int rows, int cols) override {
    if (rows <= 0 || cols <= 0 || rows > 1000 || cols > 1000) {
      return make_error(ErrorCode::kInvalidArgument, "terminal size must be 1..1000 rows and columns");
    }
    return ok_status();
  }

  void cancel() override {
    std::lock_guard lock(world_->mutex);
    cancelled_ = true;
    world_->changed.notify_all();
  }

  Result<int> exit_code() override {
    std::lock_guard lock(world_->mutex);
    world_->settle();
    if (!ended()) return make_error(ErrorCode::kFailedPrecondition, "the exec process is still running");
    bool finished = !script_.echo_stdin || stdin_closed_;
    return finished ? script_.exit_code : 137;
  }

 private:
  using World = FakeExecutor::World;
  // Under the world's lock, from here on.
  void push(LogStream stream, std::string_view text) {
    if (tty_) {
      pending_.emplace_back(LogStream::kStdout, as_terminal(text));
    } else {
      pending_.emplace_back(stream, std::string(text));
    }
  }
  bool task_gone() {
    Task* t = world_->find(task_id_);
    return t == nullptr || t->state != TaskState::kRunning;
  }
  bool ended() { return !script_.echo_stdin || stdin_closed_ || task_gone(); }

  std::shared_ptr<World> world_;
  std::string task_id_;
  ExecScript script_;
  bool tty_;
  std::vector<std::pair<LogStream, std::string>> pending_;
  bool stdin_closed_ = false;
  bool cancelled_ = false;
};

}  // namespace

Fingerprint FakeOptions::default_fingerprint() {
  Fingerprint fp;
  fp.backend = "fake";
  fp.healthy = true;
  fp.engine = "fake";
  fp.version = "1";
  fp.runtimes = {"runc"};
  fp.gpu_capable = false;
  fp.gpu_detail = "the fake executor passes no GPUs (set FakeOptions::fingerprint.gpu_capable)";
  return fp;
}

FakeExecutor::FakeExecutor(ManualClock& clock, FakeOptions options)
    : world_(std::make_shared<World>(clock, std::move(options))) {}

FakeExecutor::~FakeExecutor() = default;

void FakeExecutor::script(const std::string& job_id, TaskScript script) {
  std::lock_guard lock(world_->mutex);
  world_->scripts.insert_or_assign(job_id, std::move(script));
}

void FakeExecutor::script_exec(const std::vector<std::string>& command, ExecScript script) {
  std::lock_guard lock(world_->mutex);
  world_->exec_scripts.insert_or_assign(command, std::move(script));
}

void FakeExecutor::advance(std::chrono::nanoseconds d) {
  std::lock_guard lock(world_->mutex);
  world_->move_to(world_->clock.now() + std::max(d, std::chrono::nanoseconds(0)));
}

bool FakeExecutor::advance_to_next_event() {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  auto next = world_->next_event();
  if (!next) return false;
  world_->move_to(*next);
  return true;
}

TimePoint FakeExecutor::now() const {
  std::lock_guard lock(world_->mutex);
  return world_->clock.now();
}

bool FakeExecutor::lose(const std::string& task_id) {
  std::lock_guard lock(world_->mutex);
  bool erased = world_->tasks.erase(task_id) > 0;
  world_->changed.notify_all();
  return erased;
}

bool FakeExecutor::wait_for_blocked(int n, std::chrono::milliseconds real_timeout) {
  std::unique_lock lock(world_->mutex);
  return world_->changed.wait_for(lock, real_timeout, [&] { return world_->blocked >= n; });
}

Result<int> FakeExecutor::add_process(const TaskHandle& handle) {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  Task* t = world_->find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  if (t->state != TaskState::kRunning) return make_error(ErrorCode::kFailedPrecondition, "the task is not running");
  t->children.push_back(world_->next_pid++);
  return t->children.back();
}

void FakeExecutor::set_stats(const std::string& task_id, TaskStats stats) {
  std::lock_guard lock(world_->mutex);
  if (Task* t = world_->find(task_id)) t->stats = stats;
}

std::vector<TaskSpec> FakeExecutor::started() const {
  std::lock_guard lock(world_->mutex);
  return world_->started;
}

std::vector<DestroyCall> FakeExecutor::destroyed() const {
  std::lock_guard lock(world_->mutex);
  return world_->destroyed;
}

std::vector<std::pair<std::string, int>> FakeExecutor::signals() const {
  std::lock_guard lock(world_->mutex);
  return world_->signals;
}

Fingerprint FakeExecutor::fingerprint() { return world_->options.fingerprint; }

Status FakeExecutor::check(const TaskSpec& spec) {
  // options are const after construction: no lock needed.
  const FakeOptions& o = world_->options;
  if (spec.job_id.empty()) return make_error(ErrorCode::kInvalidArgument, "a task needs a job id");
  if (o.images) {
    auto ref = parse_image_ref(spec.image);
    if (!ref) return std::move(ref).error();
    auto rule = o.images->check(*ref);
    if (!rule) return std::move(rule).error();
  }
  if (!o.fingerprint.healthy) return make_error(ErrorCode::kUnavailable, o.fingerprint.detail);
  if (!spec.gpu_uuids.empty() && !spec.simulate_gpus && !o.fingerprint.gpu_capable) {
    return make_error(ErrorCode::kFailedPrecondition, "this job asks for " + std::to_string(spec.gpu_uuids.size()) +
                                                          " GPU(s) but " + o.fingerprint.gpu_detail);
  }
  const auto& rt = o.fingerprint.runtimes;
  if (spec.isolation == Isolation::kGvisor && std::find(rt.begin(), rt.end(), "runsc") == rt.end()) {
    return make_error(ErrorCode::kFailedPrecondition, "gVisor isolation needs the runsc runtime, which this fake lacks");
  }
  return ok_status();
}

Result<TaskHandle> FakeExecutor::start(const TaskSpec& spec) {
  YONDER_TRY(check(spec));
  std::lock_guard lock(world_->mutex);
  World& w = *world_;
  w.settle();
  TaskScript script = w.options.default_script;
  if (auto it = w.scripts.find(spec.job_id); it != w.scripts.end()) {
    script = std::move(it->second);
    w.scripts.erase(it);
  }
  if (script.start_error) return *script.start_error;
  for (const auto& [id, t] : w.tasks) {
    if (t.handle.job_id == spec.job_id) {
      return make_error(ErrorCode::kAlreadyExists, "job " + spec.job_id + " already has a task (" + id + ")");
    }
  }
  std::stable_sort(script.output.begin(), script.output.end(),
                   [](const ScriptedLine& a, const ScriptedLine& b) { return a.at < b.at; });
  char id[32];
  std::snprintf(id, sizeof id, "fake-%012llu", static_cast<unsigned long long>(w.next_task++));
  Task t;
  t.handle.backend = "fake";
  t.handle.job_id = spec.job_id;
  t.handle.task_id = id;
  t.handle.image_id = "fake:" + spec.image;
  t.tty = spec.tty;
  t.started_at = w.clock.now();
  t.pid = w.next_pid++;
  t.stats = script.stats;
  t.script = std::move(script);
  TaskHandle handle = t.handle;
  w.tasks.emplace(handle.task_id, std::move(t));
  w.started.push_back(spec);
  w.settle();  // what it does at once (lines at 0, an exit at 0)
  w.changed.notify_all();
  return handle;
}

Result<TaskStatus> FakeExecutor::recover(const TaskHandle& handle) {
  if (handle.backend != "fake" || handle.task_id.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "the stored handle of job " + handle.job_id + " is not a fake handle");
  }
  return inspect(handle);
}

Result<TaskStatus> FakeExecutor::inspect(const TaskHandle& handle) {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  const Task* t = world_->find(handle.task_id);
  if (t == nullptr) return TaskStatus{};
  TaskStatus st;
  st.state = t->state;
  st.pid = t->pid;
  if (t->state == TaskState::kExited) st.exit = t->exit;
  return st;
}

Result<ExitInfo> FakeExecutor::wait(const TaskHandle& handle, const CancelSlot& on_cancel) {
  auto token = std::make_shared<FakeCancel>(world_);
  if (on_cancel) on_cancel(token);
  std::unique_lock lock(world_->mutex);
  World& w = *world_;
  w.settle();
  if (w.find(handle.task_id) == nullptr) return task_missing(handle.task_id);
  auto wake = w.block(lock, [&] {
    const Task* t = w.find(handle.task_id);
    return t == nullptr || t->state == TaskState::kExited;
  }, std::nullopt, token->flag());
  if (wake == World::Wake::kCancelled) return make_error(ErrorCode::kUnavailable, "cancelled");
  const Task* t = w.find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  return t->exit;
}

Status FakeExecutor::signal(const TaskHandle& handle, int sig) {
  if (sig < 1 || sig > 64) return make_error(ErrorCode::kInvalidArgument, "no signal " + std::to_string(sig));
  std::lock_guard lock(world_->mutex);
  World& w = *world_;
  w.settle();
  Task* t = w.find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  if (t->state != TaskState::kRunning) return ok_status();  // as the engines: not running is not an error
  w.deliver(*t, sig);
  w.settle();
  w.changed.notify_all();
  return ok_status();
}

Status FakeExecutor::stop(const TaskHandle& handle, int sig, std::chrono::seconds grace) {
  if (sig < 1 || sig > 64) return make_error(ErrorCode::kInvalidArgument, "no signal " + std::to_string(sig));
  std::unique_lock lock(world_->mutex);
  World& w = *world_;
  w.settle();
  Task* t = w.find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  if (t->state == TaskState::kRunning) {
    w.deliver(*t, sig);
    TimePoint kill = w.clock.now() + std::max(grace, std::chrono::seconds(0));
    if (!t->kill_at || kill < *t->kill_at) t->kill_at = kill;
    w.settle();
    w.changed.notify_all();
  }
  w.block(lock, [&] {
    const Task* now = w.find(handle.task_id);
    return now == nullptr || now->state != TaskState::kRunning;
  }, std::nullopt, nullptr);
  return ok_status();
}

Status FakeExecutor::destroy(const TaskHandle& handle, bool remove_workspace) {
  std::lock_guard lock(world_->mutex);
  world_->destroyed.push_back({handle.job_id, handle.task_id, remove_workspace});
  world_->tasks.erase(handle.task_id);
  world_->changed.notify_all();
  return ok_status();
}

Status FakeExecutor::remove_task(const std::string& task_id) {
  std::lock_guard lock(world_->mutex);
  world_->tasks.erase(task_id);
  world_->changed.notify_all();
  return ok_status();
}

Result<TaskStats> FakeExecutor::stats(const TaskHandle& handle) {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  const Task* t = world_->find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  return t->state == TaskState::kRunning ? t->stats : TaskStats{};
}

Result<std::unique_ptr<ExecSession>> FakeExecutor::exec(const TaskHandle& handle, const ExecSpec& spec) {
  if (spec.command.empty()) return make_error(ErrorCode::kInvalidArgument, "exec needs a command");
  std::lock_guard lock(world_->mutex);
  world_->settle();
  const Task* t = world_->find(handle.task_id);
  if (t == nullptr) return task_missing(handle.task_id);
  if (t->state != TaskState::kRunning) {
    return make_error(ErrorCode::kFailedPrecondition, "task " + handle.task_id + " is not running");
  }
  ExecScript script;
  if (auto it = world_->exec_scripts.find(spec.command); it != world_->exec_scripts.end()) script = it->second;
  return std::unique_ptr<ExecSession>(
      std::make_unique<FakeExecSession>(world_, handle.task_id, std::move(script), spec.tty));
}

Status FakeExecutor::logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
                          const CancelSlot& on_cancel) {
  auto token = std::make_shared<FakeCancel>(world_);
  if (on_cancel) on_cancel(token);
  std::unique_lock lock(world_->mutex);
  World& w = *world_;
  w.settle();
  if (w.find(handle.task_id) == nullptr) return task_missing(handle.task_id);
  size_t next = 0;  // the first entry not yet handed to the sink
  while (true) {
    const Task* t = w.find(handle.task_id);
    if (t == nullptr) return ok_status();  // it vanished: the stream ends, as the engine's does
    std::vector<Entry> batch(t->log.begin() + static_cast<std::ptrdiff_t>(next), t->log.end());
    next = t->log.size();
    bool ended = t->state != TaskState::kRunning;
    lock.unlock();  // the sink may call back into the executor
    for (const Entry& e : batch) {
      if (options.since_unix_ns > 0 && e.unix_ns <= options.since_unix_ns) continue;
      if (!sink(e.stream, e.unix_ns, e.text)) return ok_status();
    }
    lock.lock();
    if (!options.follow || ended) return ok_status();  // an ended task writes nothing more
    auto wake = w.block(lock, [&] {
      const Task* now = w.find(handle.task_id);
      return now == nullptr || now->log.size() > next || now->state != TaskState::kRunning;
    }, std::nullopt, token->flag());
    if (wake == World::Wake::kCancelled) return ok_status();
  }
}

Result<std::vector<OwnedTask>> FakeExecutor::list_owned() {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  std::vector<OwnedTask> out;
  for (const auto& [id, t] : world_->tasks) {
    out.push_back({t.handle.job_id, id, t.state == TaskState::kRunning, t.handle});
  }
  return out;
}

bool FakeExecutor::owns_pid(const TaskHandle& handle, int pid) {
  std::lock_guard lock(world_->mutex);
  world_->settle();
  const Task* t = world_->find(handle.task_id);
  if (t == nullptr || t->state != TaskState::kRunning || pid <= 0) return false;
  return pid == t->pid || std::find(t->children.begin(), t->children.end(), pid) != t->children.end();
}

}  // namespace yonder::exec::fake
