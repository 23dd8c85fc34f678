// The Slurm backend against the real one-node cluster of scripts/slurm.sh
// (label `integration`; two fake GPUs): Slurm's CUDA_VISIBLE_DEVICES, its
// queue (two one-GPU jobs run, the third waits for Resources), cancel, the
// cluster's time limit, a refusal in Slurm's words, output streamed as it
// grows, and re-adoption by a fresh executor (a restarted daemon).
//
// Jobs wait for a "release" file in their workspace instead of sleeping, so
// the test decides when each ends.
#include "exec/slurm/slurm_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "support/slurm_env.h"
#include "support/wait_until.h"

namespace yonder::exec::slurm {
namespace {

using namespace std::chrono_literals;

std::string random_hex(int n) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back("0123456789abcdef"[rd() % 16]);
  return s;
}

// Waits in the job until the test creates "release" in the workspace.
const std::string kUntilReleased = "while [ ! -e release ]; do sleep 0.1; done";

class SlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_SLURM_OR_SKIP();
    root_ = testing::slurm_work_root() + "/test-" + random_hex(8);
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    owner_ = "test-" + random_hex(12);
    executor_ = make();
  }
  void TearDown() override {
    if (!executor_) return;
    auto owned = executor_->list_owned();
    if (owned) {
      for (auto& t : *owned) (void)executor_->destroy(t.handle, true);
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::unique_ptr<SlurmExecutor> make() {
    SlurmOptions o;
    o.conf = testing::slurm_conf();
    o.workdir_root = root_;
    o.owner = owner_;
    o.poll = 100ms;
    return std::make_unique<SlurmExecutor>(std::move(o));
  }
  TaskSpec spec(const std::string& script, int gpus = 0) {
    TaskSpec s;
    s.job_id = random_hex(16);
    s.command = {"/bin/sh", "-c", script};
    s.limits.memory_bytes = 64 << 20;
    s.limits.wall_time_s = 600;
    for (int i = 0; i < gpus; ++i) s.gpu_uuids.push_back("GPU-slurm-localhost-" + std::to_string(i));
    return s;
  }
  void release(const TaskHandle& h) { std::ofstream(h.workspace + "/release") << "go"; }
  std::string output(const TaskHandle& h) {
    std::string out;
    EXPECT_TRUE(executor_->logs(h, {}, [&](LogStream, int64_t, std::string_view d) {
      out += d;
      return true;
    }, {}).ok());
    return out;
  }
  // Polls the cluster (it has no events) until `pred` holds for the task.
  TaskState await_state(const TaskHandle& h, const std::function<bool(TaskState)>& pred) {
    TaskState s = TaskState::kMissing;
    testing::wait_until(
        [&] {
          auto st = executor_->inspect(h);
          if (st) s = st->state;
          return st && pred(st->state);
        },
        120s, 100ms);
    return s;
  }

  std::string root_, owner_;
  std::unique_ptr<SlurmExecutor> executor_;
};

TEST_F(SlurmExecutorTest, GpuJobSeesSlurmsCudaVisibleDevices) {
  auto fp = executor_->fingerprint();
  EXPECT_TRUE(fp.healthy) << fp.detail;
  EXPECT_TRUE(fp.gpu_capable) << fp.gpu_detail;
  auto h = executor_->start(spec("echo CVD=$CUDA_VISIBLE_DEVICES uid=$(id -u) job=$YONDER_JOB_ID home=$HOME", 1));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->backend, "slurm");
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok()) << exit.error().to_string();
  EXPECT_EQ(exit->exit_code, 0);
  std::string out = output(*h);
  EXPECT_TRUE(out.find("CVD=0 ") != std::string::npos || out.find("CVD=1 ") != std::string::npos) << out;
  EXPECT_NE(out.find("uid=65534"), std::string::npos) << out;  // slurm.run_as: nobody
  EXPECT_NE(out.find("job=" + h->job_id), std::string::npos) << out;
}

TEST_F(SlurmExecutorTest, ExitCodeAndUploadedFiles) {
  std::string seed = root_ + "/seed";
  std::filesystem::create_directories(seed);
  std::ofstream(seed + "/input.txt") << "uploaded";
  auto s = spec("cat input.txt; exit 7");
  s.seed_dir = seed;
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_code, 7);
  EXPECT_EQ(exit->cause, "");
  EXPECT_EQ(output(*h), "uploaded");
}

TEST_F(SlurmExecutorTest, ThreeOneGpuJobsOnTwoGpusRunTwoAtATime) {
  std::vector<TaskHandle> jobs;
  for (int i = 0; i < 3; ++i) {
    auto h = executor_->start(spec(kUntilReleased, 1));
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    jobs.push_back(*h);
  }
  auto running = [&] {
    int n = 0;
    for (auto& h : jobs) n += executor_->inspect(h)->state == TaskState::kRunning;
    return n;
  };
  EXPECT_EQ(await_state(jobs[0], [](TaskState s) { return s == TaskState::kRunning; }), TaskState::kRunning);
  EXPECT_EQ(await_state(jobs[1], [](TaskState s) { return s == TaskState::kRunning; }), TaskState::kRunning);
  EXPECT_EQ(running(), 2);
  EXPECT_EQ(executor_->inspect(jobs[2])->state, TaskState::kCreated);
  // Slurm gives a job its reason on its next scheduling pass ("None" until then).
  std::string why;
  EXPECT_TRUE(testing::wait_until(
      [&] {
        why = testing::slurm_command({"squeue", "-h", "-j", jobs[2].task_id, "-o", "%T %r"});
        return why != "PENDING None\n";
      },
      120s, 50ms))
      << "Slurm never gave the third job a reason: " << why;
  EXPECT_EQ(why, "PENDING Resources\n");
  release(jobs[0]);
  ASSERT_TRUE(executor_->wait(jobs[0], {}).ok());
  EXPECT_EQ(await_state(jobs[2], [](TaskState s) { return s == TaskState::kRunning; }), TaskState::kRunning);
  release(jobs[1]);
  release(jobs[2]);
  for (auto& h : jobs) EXPECT_EQ(executor_->wait(h, {})->exit_code, 0);
}

TEST_F(SlurmExecutorTest, StopCancelsRunningAndQueuedJobs) {
  auto h = executor_->start(spec("trap 'echo got TERM; exit 3' TERM; " + kUntilReleased));
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(await_state(*h, [](TaskState s) { return s == TaskState::kRunning; }), TaskState::kRunning);
  // A queued job too: it asks for more GPUs than are free while two run.
  auto busy1 = executor_->start(spec(kUntilReleased, 1));
  auto busy2 = executor_->start(spec(kUntilReleased, 1));
  auto queued = executor_->start(spec("echo never", 1));
  ASSERT_TRUE(busy1.ok() && busy2.ok() && queued.ok());
  ASSERT_TRUE(executor_->stop(*queued, SIGTERM, 2s).ok());
  auto q = executor_->inspect(*queued);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->state, TaskState::kExited);
  EXPECT_EQ(q->exit.cause, "cancelled_by_cluster");
  EXPECT_EQ(output(*queued), "");

  ASSERT_TRUE(executor_->stop(*h, SIGTERM, 10s).ok());
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok());
  EXPECT_NE(exit->exit_code, 0);
  release(*busy1);
  release(*busy2);
}

TEST_F(SlurmExecutorTest, ImpossibleRequestIsRefusedWithSlurmsReason) {
  auto s = spec("true", 5);  // the node has two
  auto h = executor_->start(s);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(h.error().message().find("Requested node configuration is not available"), std::string::npos)
      << h.error().to_string();
  EXPECT_FALSE(std::filesystem::exists(executor_->job_dir(s.job_id)));  // nothing left behind
}

TEST_F(SlurmExecutorTest, ClusterTimeLimitIsReported) {
  auto s = spec("sleep 600");
  s.limits.wall_time_s = 1;  // Slurm rounds up to a minute and checks every 30 s
  auto h = executor_->start(s);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  auto exit = executor_->wait(*h, {});
  ASSERT_TRUE(exit.ok()) << exit.error().to_string();
  EXPECT_EQ(exit->cause, "time_limit");
  EXPECT_NE(exit->error.find("time limit"), std::string::npos);
}

TEST_F(SlurmExecutorTest, LogsStreamAsTheOutputGrows) {
  auto h = executor_->start(spec("echo first; " + kUntilReleased + "; echo second"));
  ASSERT_TRUE(h.ok());
  std::string seen;
  int64_t last_time = 0;
  LogOptions follow;
  follow.follow = true;
  auto st = executor_->logs(*h, follow, [&](LogStream, int64_t t, std::string_view d) {
    EXPECT_GT(t, last_time);
    last_time = t;
    seen += d;
    if (seen == "first\n") release(*h);  // only after the first line arrived does the job go on
    return true;
  }, {});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(seen, "first\nsecond\n");
  // Resuming from the time of the first entry gives only what came after.
  std::string rest;
  LogOptions resume;
  resume.since_unix_ns = last_time - static_cast<int64_t>(std::string("second\n").size());
  ASSERT_TRUE(executor_->logs(*h, resume, [&](LogStream, int64_t, std::string_view d) {
    rest += d;
    return true;
  }, {}).ok());
  EXPECT_EQ(rest, "second\n");
}

TEST_F(SlurmExecutorTest, AFreshExecutorReadoptsJobsByTheirSlurmIds) {
  auto h = executor_->start(spec("echo adopted; " + kUntilReleased, 1));
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(await_state(*h, [](TaskState s) { return s == TaskState::kRunning; }), TaskState::kRunning);
  auto stored = TaskHandle::from_json(h->to_json());  // what the jobs table keeps
  ASSERT_TRUE(stored.ok());
  executor_ = make();  // the daemon restarted
  auto owned = executor_->list_owned();
  ASSERT_TRUE(owned.ok()) << owned.error().to_string();
  ASSERT_EQ(owned->size(), 1u);
  EXPECT_EQ((*owned)[0].job_id, h->job_id);
  EXPECT_EQ((*owned)[0].task_id, h->task_id);
  EXPECT_TRUE((*owned)[0].running);
  EXPECT_EQ((*owned)[0].handle.workspace, h->workspace);
  auto st = executor_->recover(*stored);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, TaskState::kRunning);
  release(*stored);
  auto exit = executor_->wait(*stored, {});
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(output(*stored), "adopted\n");
}

TEST_F(SlurmExecutorTest, RefusesWhatItCannotDo) {
  auto s = spec("true");
  s.tty = true;
  EXPECT_EQ(executor_->check(s).error().code(), ErrorCode::kFailedPrecondition);
  s = spec("true");
  s.command.clear();
  EXPECT_EQ(executor_->check(s).error().code(), ErrorCode::kInvalidArgument);
  s = spec("true");
  s.env["BAD NAME"] = "x";
  EXPECT_FALSE(executor_->check(s).ok());
}

}  // namespace
}  // namespace yonder::exec::slurm
