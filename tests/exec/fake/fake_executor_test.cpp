// The FakeExecutor test double (label `unit`): first the executor contract
// (executor_contract.h), in fake time with auto_advance, so the fake is held
// to what the Docker and Podman backends do; then what only the fake has:
// scripts, the manual clock and blocked callers, lost tasks, and several
// threads at once (this binary also runs under TSan).
#include "exec/fake/fake_executor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <thread>

#include "exec/executor_contract.h"

namespace yonder::exec::fake {
namespace {

using namespace std::chrono_literals;

const TimePoint kEpoch = TimePoint(std::chrono::seconds(1'700'000'000));

int64_t ns_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

FakeOptions test_options(bool auto_advance) {
  FakeOptions o;
  o.images = *ImagePolicy::parse("yonder-test/*", "never");
  o.auto_advance = auto_advance;
  return o;
}

TaskSpec task(const std::string& job_id) {
  TaskSpec s;
  s.job_id = job_id;
  s.image = "yonder-test/busybox:1";
  s.command = {"fake"};
  return s;
}

// --- The contract, in fake time ---

class FakeContractBackend final : public contract::ContractBackend {
 public:
  std::optional<contract::Unavailable> prepare() override { return std::nullopt; }
  Executor& executor() override { return fake_; }
  std::unique_ptr<Executor> other_owner() override {
    return std::make_unique<FakeExecutor>(other_clock_, test_options(true));
  }
  TaskSpec prints_and_exits(const std::vector<contract::Line>& lines, int exit_code) override {
    TaskSpec s = task(next_job());
    TaskScript script;
    std::chrono::nanoseconds at{0};
    for (const auto& l : lines) {
      at += l.pause_before;
      script.output.push_back({at, l.stream, l.text + "\n"});
    }
    script.exit_after = at;
    script.exit_code = exit_code;
    fake_.script(s.job_id, std::move(script));
    return s;
  }
  TaskSpec runs_until_stopped(bool ignoring_sigterm) override {
    TaskSpec s = task(next_job());
    TaskScript script;
    script.ignores_signals = ignoring_sigterm;
    if (ignoring_sigterm) script.output.push_back({0ns, LogStream::kStdout, "ready\n"});
    fake_.script(s.job_id, std::move(script));
    return s;
  }
  std::optional<TaskSpec> runs_out_of_memory() override {
    TaskSpec s = task(next_job());
    TaskScript script;
    script.exit_after = 300ms;
    script.oom_kill = true;
    fake_.script(s.job_id, std::move(script));
    return s;
  }
  TaskSpec fails_to_start() override {
    TaskSpec s = task(next_job());
    TaskScript script;
    script.start_error = make_error(ErrorCode::kInternal, "the engine refused to create the container");
    fake_.script(s.job_id, std::move(script));
    return s;
  }
  ExecSpec exec_prints_and_exits(const std::vector<contract::Line>& lines, int exit_code) override {
    ExecSpec e;
    e.command = {"fake-exec", std::to_string(++execs_)};
    ExecScript script;
    for (const auto& l : lines) script.output.emplace_back(l.stream, l.text + "\n");
    script.exit_code = exit_code;
    fake_.script_exec(e.command, std::move(script));
    return e;
  }
  TimePoint now() override { return fake_.now(); }
  bool pass_time_until(const std::function<bool()>& ready, std::chrono::seconds limit) override {
    const TimePoint deadline = fake_.now() + limit;
    while (!ready()) {
      if (fake_.now() >= deadline) return false;
      // To the next scripted event, or through a quiet stretch in steps.
      if (!fake_.advance_to_next_event()) fake_.advance(std::min<std::chrono::nanoseconds>(100ms, deadline - fake_.now()));
    }
    return true;
  }

 private:
  std::string next_job() { return "job" + std::to_string(++jobs_); }

  ManualClock clock_{kEpoch};
  ManualClock other_clock_{kEpoch};
  FakeExecutor fake_{clock_, test_options(true)};
  int jobs_ = 0;
  int execs_ = 0;
};

}  // namespace

using contract::ExecutorContract;
INSTANTIATE_TEST_SUITE_P(Fake, ExecutorContract,
                         ::testing::Values(contract::ContractBackendFactory{
                             "fake", [] { return std::make_unique<FakeContractBackend>(); }}),
                         contract::contract_backend_name);

namespace {

// --- What only the fake has ---

class FakeExecutorTest : public ::testing::Test {
 protected:
  TaskHandle start(const std::string& job_id, TaskScript script) {
    fake_.script(job_id, std::move(script));
    auto h = fake_.start(task(job_id));
    EXPECT_TRUE(h.ok()) << h.error().to_string();
    return h.ok() ? *h : TaskHandle{};
  }
  std::string out_of(const TaskHandle& h, LogOptions options = {}) {
    std::string text;
    auto st = fake_.logs(h, options, [&](LogStream, int64_t, std::string_view d) {
      text += d;
      return true;
    }, {});
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    return text;
  }

  ManualClock clock_{kEpoch};
  FakeExecutor fake_{clock_, test_options(false)};
};

TEST_F(FakeExecutorTest, WaitBlocksUntilTheClockReachesTheScriptedExit) {
  TaskScript script;
  script.exit_after = 5s;
  script.exit_code = 7;
  auto h = start("a", script);
  auto waiting = std::async(std::launch::async, [&] { return fake_.wait(h, {}); });
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  fake_.advance(4s);
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "wait returned before the scripted exit";
  EXPECT_EQ(fake_.inspect(h)->state, TaskState::kRunning);
  fake_.advance(1s);
  auto exit = waiting.get();
  ASSERT_TRUE(exit.ok()) << exit.error().to_string();
  EXPECT_EQ(exit->exit_code, 7);
  EXPECT_EQ(fake_.now(), kEpoch + 5s);
}

TEST_F(FakeExecutorTest, AParkedWaitIsCancelledFromAnotherThread) {
  auto h = start("a", {});
  std::promise<std::shared_ptr<Cancel>> token;
  auto waiting = std::async(std::launch::async, [&] {
    return fake_.wait(h, [&](std::shared_ptr<Cancel> c) { token.set_value(std::move(c)); });
  });
  auto cancel = token.get_future().get();
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  cancel->cancel();
  auto r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(fake_.inspect(h)->state, TaskState::kRunning);
}

TEST_F(FakeExecutorTest, LinesAppearWhenTheClockPassesTheirTimes) {
  TaskScript script;
  script.output = {{5s, LogStream::kStderr, "late\n"}, {0s, LogStream::kStdout, "first\n"},
                   {2s, LogStream::kStdout, "second\n"}};  // sorted by time at start
  script.exit_after = 6s;
  auto h = start("a", script);
  EXPECT_EQ(out_of(h), "first\n");
  fake_.advance(2s);
  EXPECT_EQ(out_of(h), "first\nsecond\n");
  // Single-threaded, the clock may also be moved directly: every call
  // first lets the tasks reach its time.
  clock_.advance(3s);
  std::vector<std::pair<LogStream, int64_t>> seen;
  ASSERT_TRUE(fake_.logs(h, {}, [&](LogStream s, int64_t t, std::string_view) {
    seen.emplace_back(s, t);
    return true;
  }, {}).ok());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].second, ns_of(kEpoch));
  EXPECT_EQ(seen[1].second, ns_of(kEpoch + 2s));
  EXPECT_EQ(seen[2], std::make_pair(LogStream::kStderr, ns_of(kEpoch + 5s)));
  EXPECT_EQ(out_of(h, {false, ns_of(kEpoch + 2s)}), "late\n") << "since is exclusive";
  EXPECT_EQ(fake_.inspect(h)->state, TaskState::kRunning);
}

TEST_F(FakeExecutorTest, AFollowSeesLinesAsAnotherThreadMovesTheClock) {
  TaskScript script;
  script.output = {{1s, LogStream::kStdout, "one\n"}, {2s, LogStream::kStdout, "two\n"},
                   {3s, LogStream::kStdout, "three\n"}};
  script.exit_after = 10s;  // lines after the end are never written
  script.output.push_back({11s, LogStream::kStdout, "never\n"});
  auto h = start("a", script);
  auto following = std::async(std::launch::async, [&] { return out_of(h, {true, 0}); });
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(fake_.wait_for_blocked(1));
    fake_.advance(1s);
  }
  EXPECT_EQ(following.get(), "one\ntwo\nthree\n");
  fake_.advance(5s);
  EXPECT_EQ(out_of(h), "one\ntwo\nthree\n");
  // A sink that says stop ends a follow of a running task.
  auto running = start("b", TaskScript{.output = {{0s, LogStream::kStdout, "x\n"}}});
  int calls = 0;
  ASSERT_TRUE(fake_.logs(running, {true, 0}, [&](LogStream, int64_t, std::string_view) { return ++calls < 1; }, {}).ok());
  EXPECT_EQ(calls, 1);
}

TEST_F(FakeExecutorTest, StopWaitsForACleanupWithinTheGraceAndKillsAfterIt) {
  TaskScript slow;
  slow.signal_exit_delay = 3s;
  auto h = start("a", slow);
  auto stopping = std::async(std::launch::async, [&] { return fake_.stop(h, SIGTERM, 10s); });
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  fake_.advance(3s);
  ASSERT_TRUE(stopping.get().ok());
  EXPECT_EQ(fake_.inspect(h)->exit.exit_code, 143);
  EXPECT_EQ(fake_.now(), kEpoch + 3s);

  TaskScript stubborn;
  stubborn.ignores_signals = true;
  auto g = start("b", stubborn);
  stopping = std::async(std::launch::async, [&] { return fake_.stop(g, SIGINT, 10s); });
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  fake_.advance(9s);
  EXPECT_EQ(stopping.wait_for(0s), std::future_status::timeout) << "stop returned within the grace";
  fake_.advance(1s);
  ASSERT_TRUE(stopping.get().ok());
  EXPECT_EQ(fake_.inspect(g)->exit.exit_code, 137);
  auto signals = fake_.signals();
  ASSERT_EQ(signals.size(), 3u);
  EXPECT_EQ(signals[0], std::make_pair(h.task_id, SIGTERM));
  EXPECT_EQ(signals[1], std::make_pair(g.task_id, SIGINT));
  EXPECT_EQ(signals[2], std::make_pair(g.task_id, static_cast<int>(SIGKILL)));
  // Stopping an ended task is not an error; a destroyed one is missing.
  EXPECT_TRUE(fake_.stop(g, SIGTERM, 1s).ok());
  ASSERT_TRUE(fake_.destroy(g, false).ok());
  auto gone = fake_.stop(g, SIGTERM, 1s);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ErrorCode::kNotFound);
}

TEST_F(FakeExecutorTest, ALostTaskIsMissingEverywhereAndEndsItsWaiters) {
  TaskScript script;
  script.lost_after = 2s;
  auto h = start("a", script);
  auto waiting = std::async(std::launch::async, [&] { return fake_.wait(h, {}); });
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  fake_.advance(2s);
  auto r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(fake_.inspect(h)->state, TaskState::kMissing);
  EXPECT_EQ(fake_.recover(h)->state, TaskState::kMissing);
  EXPECT_TRUE(fake_.list_owned()->empty());
  EXPECT_FALSE(fake_.logs(h, {}, [](LogStream, int64_t, std::string_view) { return true; }, {}).ok());
  EXPECT_FALSE(fake_.stats(h).ok());
  EXPECT_TRUE(fake_.destroyed().empty()) << "nobody destroyed it: it vanished";

  // lose() makes one vanish now, exited or not.
  TaskScript quick;
  quick.exit_after = 0s;
  auto g = start("b", quick);
  EXPECT_EQ(fake_.inspect(g)->state, TaskState::kExited);
  EXPECT_TRUE(fake_.lose(g.task_id));
  EXPECT_EQ(fake_.inspect(g)->state, TaskState::kMissing);
  EXPECT_FALSE(fake_.lose(g.task_id));
}

TEST_F(FakeExecutorTest, AScriptedStartFailureLeavesNothingAndIsUsedOnce) {
  TaskScript broken;
  broken.start_error = make_error(ErrorCode::kUnavailable, "the engine is restarting");
  fake_.script("a", broken);
  auto first = fake_.start(task("a"));
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().message(), "the engine is restarting");
  EXPECT_TRUE(fake_.list_owned()->empty());
  EXPECT_TRUE(fake_.started().empty());
  auto second = fake_.start(task("a"));  // the default script: runs until stopped
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(fake_.inspect(*second)->state, TaskState::kRunning);
  ASSERT_EQ(fake_.started().size(), 1u);
  EXPECT_EQ(fake_.started()[0].job_id, "a");
  auto again = fake_.start(task("a"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kAlreadyExists);
}

TEST_F(FakeExecutorTest, AnOomKillIs137WithTheFlagWhateverTheScriptedCode) {
  TaskScript script;
  script.exit_after = 1s;
  script.exit_code = 3;
  script.oom_kill = true;
  auto h = start("a", script);
  EXPECT_TRUE(fake_.advance_to_next_event());
  EXPECT_EQ(fake_.now(), kEpoch + 1s);
  auto st = fake_.inspect(h);
  EXPECT_EQ(st->exit.exit_code, 137);
  EXPECT_TRUE(st->exit.oom_killed);
  EXPECT_EQ(st->pid, 0);
  EXPECT_FALSE(fake_.advance_to_next_event()) << "nothing is left to happen";
}

TEST_F(FakeExecutorTest, AutoAdvanceMovesTheClockToTheEventABlockedCallerNeeds) {
  ManualClock clock(kEpoch);
  FakeExecutor fake(clock, test_options(true));
  TaskScript later;
  later.exit_after = 90s;
  later.exit_code = 2;
  TaskScript sooner;
  sooner.exit_after = 30s;
  fake.script("a", later);
  fake.script("b", sooner);
  auto a = fake.start(task("a"));
  auto b = fake.start(task("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto exit = fake.wait(*a, {});
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_code, 2);
  EXPECT_EQ(fake.now(), kEpoch + 90s) << "exactly at the exit, through b's on the way";
  EXPECT_EQ(fake.inspect(*b)->state, TaskState::kExited);
}

TEST_F(FakeExecutorTest, CheckRefusesWhatTheEnginesRefuse) {
  TaskSpec gpu = task("a");
  gpu.gpu_uuids = {"GPU-fake-0"};
  auto refused = fake_.start(gpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(fake_.list_owned()->empty());
  gpu.simulate_gpus = true;
  EXPECT_TRUE(fake_.check(gpu).ok());

  TaskSpec gvisor = task("b");
  gvisor.isolation = Isolation::kGvisor;
  EXPECT_EQ(fake_.check(gvisor).error().code(), ErrorCode::kFailedPrecondition);

  TaskSpec other_image = task("c");
  other_image.image = "busybox:latest";
  EXPECT_EQ(fake_.check(other_image).error().code(), ErrorCode::kPermissionDenied);

  FakeOptions down;
  down.fingerprint.healthy = false;
  down.fingerprint.detail = "the engine is down";
  down.fingerprint.gpu_capable = true;
  down.fingerprint.runtimes.push_back("runsc");
  FakeExecutor broken(clock_, down);
  EXPECT_EQ(broken.check(task("d")).error().code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(broken.fingerprint().healthy);
}

TEST_F(FakeExecutorTest, AScriptedExecEchoesItsInputAndTimesOutInFakeTime) {
  auto h = start("a", {});
  fake_.script_exec({"cat"}, {{{LogStream::kStderr, "hello\n"}}, 9, true});
  auto session = fake_.exec(h, {{"cat"}, false});
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  ASSERT_TRUE((*session)->write("typed\n").ok());
  auto greeting = (*session)->read(1s);
  ASSERT_TRUE(greeting.ok() && *greeting);
  EXPECT_EQ(**greeting, std::make_pair(LogStream::kStderr, std::string("hello\n")));
  auto echoed = (*session)->read(1s);
  ASSERT_TRUE(echoed.ok() && *echoed);
  EXPECT_EQ((*echoed)->second, "typed\n");
  EXPECT_EQ((*session)->exit_code().error().code(), ErrorCode::kFailedPrecondition) << "still running";
  // Nothing more until stdin closes: a read times out when the fake clock
  // passes its timeout.
  auto reading = std::async(std::launch::async, [&] { return (*session)->read(2s); });
  ASSERT_TRUE(fake_.wait_for_blocked(1));
  fake_.advance(2s);
  auto timed_out = reading.get();
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.error().code(), ErrorCode::kUnavailable);
  (*session)->close_stdin();
  auto end = (*session)->read(1s);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  EXPECT_EQ(*(*session)->exit_code(), 9);
  EXPECT_FALSE((*session)->resize(0, 80).ok());

  // A TTY session writes one stream with a terminal's line ends, and ends
  // (killed) with its task.
  auto tty = fake_.exec(h, {{"cat"}, true, 24, 80});
  ASSERT_TRUE(tty.ok());
  auto line = (*tty)->read(1s);
  ASSERT_TRUE(line.ok() && *line);
  EXPECT_EQ(**line, std::make_pair(LogStream::kStdout, std::string("hello\r\n")));
  ASSERT_TRUE(fake_.signal(h, SIGKILL).ok());
  auto after = (*tty)->read(1s);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
  EXPECT_EQ(*(*tty)->exit_code(), 137);
  auto refused = fake_.exec(h, {{"cat"}, false});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kFailedPrecondition);
}

TEST_F(FakeExecutorTest, ATtyTaskWritesOneStreamWithTerminalLineEnds) {
  fake_.script("a", TaskScript{.output = {{0s, LogStream::kStderr, "err\n"}, {0s, LogStream::kStdout, "out\n"}}});
  TaskSpec s = task("a");
  s.tty = true;
  auto h = fake_.start(s);
  ASSERT_TRUE(h.ok());
  std::vector<LogStream> streams;
  std::string text;
  ASSERT_TRUE(fake_.logs(*h, {}, [&](LogStream st, int64_t, std::string_view d) {
    streams.push_back(st);
    text += d;
    return true;
  }, {}).ok());
  EXPECT_EQ(text, "err\r\nout\r\n");
  EXPECT_EQ(streams, (std::vector<LogStream>{LogStream::kStdout, LogStream::kStdout}));
}

TEST_F(FakeExecutorTest, PidsStatsAndDestroyCallsAreWhatTheTestNeedsToSee) {
  auto h = start("a", {});
  auto st = fake_.inspect(h);
  ASSERT_GT(st->pid, 4'194'304) << "above any real pid";
  auto child = fake_.add_process(h);
  ASSERT_TRUE(child.ok());
  EXPECT_TRUE(fake_.owns_pid(h, st->pid));
  EXPECT_TRUE(fake_.owns_pid(h, *child));
  EXPECT_FALSE(fake_.owns_pid(h, *child + 1));
  EXPECT_EQ(fake_.stats(h)->memory_bytes, 64ull << 20);
  fake_.set_stats(h.task_id, {1000, 2000, 3});
  EXPECT_EQ(fake_.stats(h)->pids, 3u);
  ASSERT_TRUE(fake_.signal(h, SIGTERM).ok());
  EXPECT_FALSE(fake_.owns_pid(h, *child)) << "an ended task owns no process";
  EXPECT_EQ(fake_.stats(h)->memory_bytes, 0u);
  EXPECT_FALSE(fake_.signal(h, 0).ok());

  ASSERT_TRUE(fake_.destroy(h, false).ok());
  ASSERT_TRUE(fake_.destroy(h, true).ok());
  auto calls = fake_.destroyed();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].job_id, "a");
  EXPECT_FALSE(calls[0].remove_workspace);
  EXPECT_TRUE(calls[1].remove_workspace);
  EXPECT_TRUE(fake_.remove_task(h.task_id).ok());

  TaskHandle docker = h;
  docker.backend = "docker";
  EXPECT_EQ(fake_.recover(docker).error().code(), ErrorCode::kInvalidArgument);
}

// The provider's queue calls the executor from several threads: starts,
// waits, log follows and inspects at once while the test moves the clock.
TEST_F(FakeExecutorTest, ManyThreadsAtOnceWhileTheClockMoves) {
  constexpr int kTasks = 8;
  std::vector<TaskHandle> handles;
  for (int i = 0; i < kTasks; ++i) {
    TaskScript script;
    script.output = {{std::chrono::seconds(i), LogStream::kStdout, "line\n"}};
    script.exit_after = std::chrono::seconds(i + 1);
    script.exit_code = i;
    handles.push_back(start("job" + std::to_string(i), script));
  }
  std::vector<std::future<Result<ExitInfo>>> waits;
  std::vector<std::future<std::string>> follows;
  for (int i = 0; i < kTasks; ++i) {
    waits.push_back(std::async(std::launch::async, [&, i] {
      (void)fake_.inspect(handles[i]);
      (void)fake_.list_owned();
      return fake_.wait(handles[i], {});
    }));
    follows.push_back(std::async(std::launch::async, [&, i] { return out_of(handles[i], {true, 0}); }));
  }
  // Every waiter and follower parked: move time.
  ASSERT_TRUE(fake_.wait_for_blocked(2 * kTasks));
  for (int s = 0; s < kTasks; ++s) fake_.advance(1s);
  for (int i = 0; i < kTasks; ++i) {
    auto exit = waits[i].get();
    ASSERT_TRUE(exit.ok()) << exit.error().to_string();
    EXPECT_EQ(exit->exit_code, i);
    EXPECT_EQ(follows[i].get(), "line\n");
  }
  std::vector<std::thread> destroyers;
  for (int i = 0; i < kTasks; ++i) destroyers.emplace_back([&, i] { EXPECT_TRUE(fake_.destroy(handles[i], true).ok()); });
  for (auto& t : destroyers) t.join();
  EXPECT_TRUE(fake_.list_owned()->empty());
}

}  // namespace
}  // namespace yonder::exec::fake
