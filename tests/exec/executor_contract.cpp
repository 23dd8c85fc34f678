// The executor contract's tests (see executor_contract.h). Each states one
// behaviour the code above the executor relies on: the provider's queue
// (start, wait, exit codes, OOM), its log pump (streams, follow, resume
// after a restart), its stop and deadline handling (signal, grace, kill),
// recovery after a restart (inspect, recover, list_owned, destroy) and
// GPU accounting (owns_pid).
#include "exec/executor_contract.h"

#include <signal.h>
#include <unistd.h>

#include <future>
#include <mutex>

namespace yonder::exec::contract {
namespace {

using namespace std::chrono_literals;

int64_t contract_unix_ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

void ExecutorContract::SetUp() {
  backend_ = GetParam().make();
  if (auto unavailable = backend_->prepare()) {
    if (unavailable->required) FAIL() << unavailable->why;
    GTEST_SKIP() << unavailable->why;
  }
  ready_ = true;
}

void ExecutorContract::TearDown() {
  if (!ready_) return;
  auto owned = ex().list_owned();
  ASSERT_TRUE(owned.ok()) << owned.error().to_string();
  for (auto& t : *owned) EXPECT_TRUE(ex().destroy(t.handle, true).ok());
}

std::string ExecutorContract::Output::stream(LogStream s) const {
  std::string text;
  for (const auto& [stream, bytes] : entries) {
    if (stream == s) text += bytes;
  }
  return text;
}

ExecutorContract::Output ExecutorContract::read_logs(const TaskHandle& h, LogOptions options) {
  Output o;
  auto st = ex().logs(h, options, [&](LogStream s, int64_t t, std::string_view d) {
    o.entries.emplace_back(s, std::string(d));
    o.times.push_back(t);
    return true;
  }, {});
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  return o;
}

TEST_P(ExecutorContract, StartThenWaitGivesTheExitCodeAndEachLineOnItsStream) {
  int64_t before = contract_unix_ns(backend_->now());
  auto h = ex().start(backend_->prints_and_exits(
      {{LogStream::kStdout, "out"}, {LogStream::kStderr, "err"}, {LogStream::kStdout, "out2"}}, 3));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = ex().wait(*h, {});
  ASSERT_TRUE(exit.ok()) << exit.error().to_string();
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_FALSE(exit->oom_killed);
  auto o = read_logs(*h);
  int64_t after = contract_unix_ns(backend_->now());
  EXPECT_EQ(o.stream(LogStream::kStdout), "out\nout2\n");
  EXPECT_EQ(o.stream(LogStream::kStderr), "err\n");
  // Entries carry the backend's time of writing (a log pump resumes from
  // it), to the second at worst: Podman's compatible API gives whole seconds.
  for (auto t : o.times) {
    EXPECT_GE(t, before - contract_unix_ns(TimePoint(1s)));
    EXPECT_LE(t, after);
  }
  // After the end, inspect and recover (a restarted daemon) agree with wait.
  for (auto st : {ex().inspect(*h), ex().recover(*h)}) {
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    EXPECT_EQ(st->state, TaskState::kExited);
    EXPECT_EQ(st->exit.exit_code, 3);
    EXPECT_FALSE(st->exit.oom_killed);
  }
}

TEST_P(ExecutorContract, LogsFollowATaskToItsEndAndResumeAfterATime) {
  auto h = ex().start(backend_->prints_and_exits(
      {{LogStream::kStdout, "one"}, {LogStream::kStdout, "two", 1s}, {LogStream::kStderr, "three"}}, 0));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto o = read_logs(*h, {true, 0});  // returns when the task ends
  EXPECT_EQ(o.stream(LogStream::kStdout), "one\ntwo\n");
  EXPECT_EQ(o.stream(LogStream::kStderr), "three\n");
  ASSERT_EQ(o.times.size(), 3u);
  auto resumed = read_logs(*h, {false, o.times[0]});
  EXPECT_EQ(resumed.stream(LogStream::kStdout), "two\n");
  EXPECT_EQ(resumed.stream(LogStream::kStderr), "three\n");
}

// What recovery after a restart relies on: the end of a task nobody waits
// for is seen by inspect and recover, with its exit code.
TEST_P(ExecutorContract, InspectAndRecoverSeeATaskEndWithoutAWait) {
  auto h = ex().start(backend_->prints_and_exits({{LogStream::kStdout, "started"}, {LogStream::kStdout, "done", 1s}}, 4));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto first = ex().inspect(*h);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_NE(first->state, TaskState::kMissing);
  ASSERT_TRUE(backend_->pass_time_until([&] {
    auto st = ex().inspect(*h);
    return st.ok() && st->state == TaskState::kExited;
  }, 30s));
  for (auto st : {ex().inspect(*h), ex().recover(*h)}) {
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    EXPECT_EQ(st->state, TaskState::kExited);
    EXPECT_EQ(st->exit.exit_code, 4);
  }
}

TEST_P(ExecutorContract, StopKillsATaskThatIgnoresSigtermWhenTheGraceEnds) {
  auto h = ex().start(backend_->runs_until_stopped(true));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  // Wait (an event: the follow stream) until the task ignores SIGTERM.
  bool ready = false;
  ASSERT_TRUE(ex().logs(*h, {true, 0}, [&](LogStream, int64_t, std::string_view d) {
    ready = d.find("ready") != std::string_view::npos;
    return !ready;
  }, {}).ok());
  ASSERT_TRUE(ready);
  auto t0 = backend_->now();
  ASSERT_TRUE(ex().stop(*h, SIGTERM, 1s).ok());
  auto took = backend_->now() - t0;
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 15s);
  auto st = ex().inspect(*h);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(st->state, TaskState::kExited);
  EXPECT_EQ(st->exit.exit_code, 137);  // SIGKILL
  EXPECT_FALSE(st->exit.oom_killed);
}

TEST_P(ExecutorContract, StopEndsATaskThatHonoursSigtermWithoutWaitingForTheGrace) {
  // On Podman the signal goes through its init (catatonit), which must
  // forward it.
  auto h = ex().start(backend_->runs_until_stopped(false));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto t0 = backend_->now();
  ASSERT_TRUE(ex().stop(*h, SIGTERM, 20s).ok());
  EXPECT_LT(backend_->now() - t0, 10s);
  auto st = ex().inspect(*h);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(st->state, TaskState::kExited);
  EXPECT_EQ(st->exit.exit_code, 143);  // SIGTERM
  EXPECT_FALSE(st->exit.oom_killed);
}

// OOM is a flag, not an exit code: 137 alone does not say it.
TEST_P(ExecutorContract, OutOfMemoryIsReportedAndAKillIsNot) {
  auto killed = ex().start(backend_->runs_until_stopped(false));
  ASSERT_TRUE(killed.ok()) << killed.error().to_string();
  ASSERT_TRUE(ex().signal(*killed, SIGKILL).ok());
  auto kexit = ex().wait(*killed, {});
  ASSERT_TRUE(kexit.ok()) << kexit.error().to_string();
  EXPECT_EQ(kexit->exit_code, 137);
  EXPECT_FALSE(kexit->oom_killed);

  auto spec = backend_->runs_out_of_memory();
  if (!spec) GTEST_SKIP() << "this backend's test setup cannot cause an out-of-memory kill";
  auto h = ex().start(*spec);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = ex().wait(*h, {});
  ASSERT_TRUE(exit.ok()) << exit.error().to_string();
  EXPECT_EQ(exit->exit_code, 137);
  EXPECT_TRUE(exit->oom_killed) << exit->error;
  auto st = ex().inspect(*h);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_TRUE(st->exit.oom_killed);
}

// One running task through what the reconciler, GPU accounting, exec and
// a cancelled waiter see; then destroyed, it is gone from all of them.
TEST_P(ExecutorContract, ARunningTaskIsOwnedUntilDestroyedAndThenMissing) {
  auto h = ex().start(backend_->runs_until_stopped(false));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto owned = ex().list_owned();
  ASSERT_TRUE(owned.ok()) << owned.error().to_string();
  ASSERT_EQ(owned->size(), 1u);
  EXPECT_EQ((*owned)[0].job_id, h->job_id);
  EXPECT_EQ((*owned)[0].task_id, h->task_id);
  EXPECT_EQ((*owned)[0].handle.task_id, h->task_id);
  EXPECT_EQ((*owned)[0].handle.workspace, h->workspace);
  EXPECT_TRUE((*owned)[0].running);
  auto others = backend_->other_owner()->list_owned();
  ASSERT_TRUE(others.ok()) << others.error().to_string();
  EXPECT_TRUE(others->empty()) << "another owner's executor lists this one's task";

  auto st = ex().inspect(*h);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(st->state, TaskState::kRunning);
  EXPECT_GT(st->pid, 0);
  EXPECT_TRUE(ex().owns_pid(*h, st->pid));
  EXPECT_FALSE(ex().owns_pid(*h, ::getpid()));

  auto session = ex().exec(*h, backend_->exec_prints_and_exits({{LogStream::kStdout, "o"}, {LogStream::kStderr, "e"}}, 5));
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  (*session)->close_stdin();
  auto got = read_to_end(**session, 20s);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->out, "o\n");
  EXPECT_EQ(got->err, "e\n");
  auto code = (*session)->exit_code();
  ASSERT_TRUE(code.ok()) << code.error().to_string();
  EXPECT_EQ(*code, 5);

  // A waiter is cancelled through the token it handed out; the task runs on.
  std::promise<std::shared_ptr<Cancel>> token;
  auto waiting = std::async(std::launch::async, [&] {
    return ex().wait(*h, [&](std::shared_ptr<Cancel> c) { token.set_value(std::move(c)); });
  });
  token.get_future().get()->cancel();
  EXPECT_FALSE(waiting.get().ok()) << "a cancelled wait returned an exit";
  auto still = ex().inspect(*h);
  ASSERT_TRUE(still.ok()) << still.error().to_string();
  EXPECT_EQ(still->state, TaskState::kRunning);

  ASSERT_TRUE(ex().destroy(*h, true).ok());
  owned = ex().list_owned();
  ASSERT_TRUE(owned.ok()) << owned.error().to_string();
  EXPECT_TRUE(owned->empty());
  for (auto gone : {ex().inspect(*h), ex().recover(*h)}) {
    ASSERT_TRUE(gone.ok()) << gone.error().to_string();
    EXPECT_EQ(gone->state, TaskState::kMissing);
  }
  // kNotFound, not any error: stop() treats a task that vanished during
  // its grace as stopped by this code.
  auto waited = ex().wait(*h, {});
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code(), ErrorCode::kNotFound) << waited.error().to_string();
  EXPECT_FALSE(ex().owns_pid(*h, st->pid));
  EXPECT_TRUE(ex().destroy(*h, true).ok()) << "destroy is idempotent";
}

TEST_P(ExecutorContract, AStartThatFailsReturnsAnErrorAndLeavesNoTask) {
  auto h = ex().start(backend_->fails_to_start());
  ASSERT_FALSE(h.ok()) << "started task " << h->task_id;
  EXPECT_FALSE(h.error().message().empty());
  auto owned = ex().list_owned();
  ASSERT_TRUE(owned.ok()) << owned.error().to_string();
  EXPECT_TRUE(owned->empty());
}

}  // namespace yonder::exec::contract
