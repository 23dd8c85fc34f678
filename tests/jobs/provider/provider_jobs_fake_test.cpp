// The provider job manager over the FakeExecutor, in stepped time: the
// queue (order, limits, a job starting when another ends), wall time (TERM,
// grace, KILL), how a job ends (exit, OOM, a vanished container, a failed
// start), GPU leases over the fake inventory, log descriptors and waiters,
// and recovery after a restart (a new manager over the same database and
// the same executor, which plays the engine and keeps its tasks).
//
// No dockerd and no real time. There is one time, the FakeExecutor's: the
// manager reads it through EngineClock and its watchdog sleeps on it, and
// advance() moves it (the tasks reach the new time, then the manager's
// sleepers wake). The test waits on events only: the manager's on_finished
// hook (a job ended), the executor's wait_for_blocked (the manager's
// threads are parked in wait, logs or stop: the jobs have started, a stop
// has been sent) and watch_log. Their real timeouts are guards against a
// hang, not pacing.
//
// What needs a real engine (mounts, a real process's output, disk and
// workspace images, the engine's own GPU refusal) stays in
// provider_jobs_test.cpp against dockerd.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "base/clock.h"
#include "exec/fake/fake_executor.h"
#include "jobs/provider/job_output.h"
#include "jobs/provider/provider_jobs.h"
#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::jobs::provider {
namespace {

using namespace std::chrono_literals;
using exec::fake::TaskScript;
using nlohmann::json;
using protocol::parse_job_request;

const TimePoint kEpoch = std::chrono::system_clock::from_time_t(1'900'000'000);
constexpr const char* kImage = "yonder-test/fake:1";
constexpr auto kGuard = 10s;  // real time: how long an awaited event may take before the test fails

// The FakeExecutor, with each task's script chosen by its command: a job
// submitted with {"fake", NAME} runs the script registered as NAME (the
// manager makes the job id only at submit and starts the task at once, so
// a script cannot be keyed by job id beforehand). Other commands run the
// default script: until stopped, ending at the first signal.
class ScriptedExecutor final : public exec::Executor {
 public:
  explicit ScriptedExecutor(exec::fake::FakeExecutor& fake) : fake_(fake) {}

  void script(const std::string& name, TaskScript script) {
    std::lock_guard lock(mutex_);
    scripts_[name] = std::move(script);
  }

  exec::Fingerprint fingerprint() override { return fake_.fingerprint(); }
  Status check(const exec::TaskSpec& spec) override { return fake_.check(spec); }
  Result<exec::TaskHandle> start(const exec::TaskSpec& spec) override {
    {
      std::lock_guard lock(mutex_);
      if (spec.command.size() == 2 && spec.command[0] == "fake") {
        if (auto it = scripts_.find(spec.command[1]); it != scripts_.end()) fake_.script(spec.job_id, it->second);
      }
    }
    return fake_.start(spec);
  }
  Result<exec::TaskStatus> recover(const exec::TaskHandle& h) override { return fake_.recover(h); }
  Result<exec::ExitInfo> wait(const exec::TaskHandle& h, const exec::CancelSlot& c) override { return fake_.wait(h, c); }
  Status stop(const exec::TaskHandle& h, int sig, std::chrono::seconds grace) override {
    return fake_.stop(h, sig, grace);
  }
  Status signal(const exec::TaskHandle& h, int sig) override { return fake_.signal(h, sig); }
  Status destroy(const exec::TaskHandle& h, bool remove_workspace) override {
    return fake_.destroy(h, remove_workspace);
  }
  Result<exec::TaskStatus> inspect(const exec::TaskHandle& h) override { return fake_.inspect(h); }
  Result<exec::TaskStats> stats(const exec::TaskHandle& h) override { return fake_.stats(h); }
  Result<std::unique_ptr<exec::ExecSession>> exec(const exec::TaskHandle& h, const exec::ExecSpec& s) override {
    return fake_.exec(h, s);
  }
  Status logs(const exec::TaskHandle& h, const exec::LogOptions& o, const exec::LogSink& sink,
              const exec::CancelSlot& c) override {
    return fake_.logs(h, o, sink, c);
  }
  Result<std::vector<exec::OwnedTask>> list_owned() override { return fake_.list_owned(); }
  Status remove_task(const std::string& task_id) override { return fake_.remove_task(task_id); }
  bool owns_pid(const exec::TaskHandle& h, int pid) override { return fake_.owns_pid(h, pid); }

 private:
  exec::fake::FakeExecutor& fake_;
  std::mutex mutex_;  // guards scripts_ (the manager's runner threads start tasks)
  std::map<std::string, TaskScript> scripts_;
};

// The manager's clock here: the FakeExecutor's own time, so the engine and
// the manager never disagree (two clocks moved one after the other would
// let a thread see one moved and not the other: a job that exits at 90 s
// stamped with the manager's 0 s). advance() moves the engine (its tasks
// reach the new time and blocked calls return), then wakes the manager's
// sleepers through a SteppedClock's subscriptions.
class EngineClock final : public WaitableClock {
 public:
  explicit EngineClock(exec::fake::FakeExecutor& fake) : fake_(fake), origin_(fake.now()) {}

  TimePoint now() const override { return fake_.now(); }
  SteadyTime steady_now() const override {
    return SteadyTime(std::chrono::hours(1)) + std::chrono::duration_cast<SteadyTime::duration>(fake_.now() - origin_);
  }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime deadline) const override {
    if (steady_now() < deadline) cv.wait(lock);
  }
  std::unique_ptr<Subscription> on_moved(std::function<void()> moved) override {
    return wakes_.on_moved(std::move(moved));
  }
  void advance(std::chrono::nanoseconds d) {
    fake_.advance(d);
    wakes_.advance(d);
  }

 private:
  exec::fake::FakeExecutor& fake_;
  const TimePoint origin_;
  SteppedClock wakes_{TimePoint{}};  // for its subscriptions; the time is the engine's
};

class ProviderJobsFakeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!jobs_) return;
    // A stop still inside its grace would hold its thread (the fake's stop
    // returns when the task ends): the engine's time runs out every grace.
    // The watchdog is not woken for it; if something else wakes it, the
    // stops it asks for end at once (only a script that ignores signals
    // waits out a grace, and such tests end their job).
    fake_.advance(24h);
    jobs_->shutdown();
    jobs_.reset();
  }

  void start_manager(const std::function<void(ProviderOptions&)>& tweak = {}) {
    auto db = store::Database::open(dir_ / "state.db");
    ASSERT_TRUE(db.ok()) << db.error().to_string();
    ASSERT_TRUE(store::migrate(*db).ok());
    ProviderOptions options;
    options.jobs_dir = dir_ / "jobs";
    options.simulate_gpus = true;
    options.max_concurrent = 4;
    options.max_per_peer = 2;
    options.stop_grace = 5s;
    options.vram_interval = 2s;
    options.account_disk = false;  // the fake has no workspace images; disk is provider_jobs_test's
    if (tweak) tweak(options);
    jobs_ = std::make_unique<ProviderJobs>(std::make_unique<JobStore>(std::move(*db)), executor_, gpus_, options,
                                           clock_);
    jobs_->set_on_finished([this](const json& view) {
      std::lock_guard lock(ended_mutex_);
      ended_[view["job_id"].get<std::string>()] = view;
      ended_cv_.notify_all();
    });
    auto started = jobs_->start();
    ASSERT_TRUE(started.ok()) << started.error().to_string();
  }
  // A daemon restart: the manager stops watching (its tasks run on in the
  // fake engine) and a new one starts over the same database.
  void stop_manager() {
    jobs_->shutdown();
    jobs_.reset();
  }

  // The tasks reach the new time (output, exits, kills), then the
  // manager's watchdog wakes.
  void advance(std::chrono::nanoseconds d) { clock_.advance(d); }

  std::string submit(const std::string& peer, json request, int peer_limit = 0) {
    request["image"] = kImage;
    if (!request.contains("command")) request["command"] = {"fake", "run"};
    auto parsed = parse_job_request(request);
    EXPECT_TRUE(parsed.ok()) << parsed.error().to_string();
    if (!parsed) return "";
    auto v = jobs_->submit(PeerId(peer), *parsed, "", peer_limit);
    EXPECT_TRUE(v.ok()) << v.error().to_string();
    return v.ok() ? (*v)["job_id"].get<std::string>() : "";
  }
  json view(const std::string& id) {
    auto v = jobs_->get(JobId(id));
    EXPECT_TRUE(v.ok()) << v.error().to_string();
    return v.ok() ? *v : json();
  }
  std::string state(const std::string& id) { return view(id).value("state", ""); }

  // The manager's threads are parked in the engine: `n` counts one wait and
  // one log follow per running job, one more per stop being carried out.
  void await_parked(int n) { ASSERT_TRUE(fake_.wait_for_blocked(n, kGuard)) << n << " callers never parked"; }
  // The job's final view, as the on_finished hook saw it.
  json await_end(const std::string& id) {
    std::unique_lock lock(ended_mutex_);
    bool ended = ended_cv_.wait_for(lock, kGuard, [&] { return ended_.count(id) > 0; });
    EXPECT_TRUE(ended) << "job " << id << " did not end";
    return ended ? ended_[id] : json();
  }
  bool has_ended(const std::string& id) {
    std::lock_guard lock(ended_mutex_);
    return ended_.count(id) > 0;
  }
  // Blocks until the job's log grows past `offset` or the job ends.
  void await_log(const std::string& id, uint64_t offset = 0) {
    auto p = std::make_shared<std::promise<void>>();
    ASSERT_TRUE(jobs_->watch_log(JobId(id), offset, [p] { p->set_value(); }).ok());
    ASSERT_EQ(p->get_future().wait_for(kGuard), std::future_status::ready) << "job " << id;
  }
  std::string output(const std::string& id) { return job_output(*jobs_, id); }
  exec::OwnedTask task_of(const std::string& id) {
    auto owned = fake_.list_owned();
    if (owned) {
      for (auto& t : *owned) {
        if (t.job_id == id) return t;
      }
    }
    ADD_FAILURE() << "no task for job " << id;
    return {};
  }
  std::vector<std::string> started_jobs() {
    std::vector<std::string> ids;
    for (const auto& spec : fake_.started()) ids.push_back(spec.job_id);
    return ids;
  }
  size_t leases() { return jobs_->executor_status()["leases"].size(); }

  testing::TempDir dir_;
  ManualClock engine_clock_{kEpoch};
  exec::fake::FakeExecutor fake_{engine_clock_};
  ScriptedExecutor executor_{fake_};
  EngineClock clock_{fake_};
  gpu::FakeGpuInventory gpus_{2, "GPU", 24ULL << 30};
  std::mutex ended_mutex_;
  std::condition_variable ended_cv_;
  std::map<std::string, json> ended_;  // by job id, from on_finished
  std::unique_ptr<ProviderJobs> jobs_;  // last: gone before what it uses
};

TEST_F(ProviderJobsFakeTest, JobsStartInOrderUpToMaxConcurrentAndMaxPerPeer) {
  start_manager([](ProviderOptions& o) {
    o.max_concurrent = 3;
    o.max_per_peer = 2;
  });
  std::string a = submit("p1", {}), b = submit("p1", {}), c = submit("p1", {});
  std::string d = submit("p2", {}), e = submit("p2", {});
  await_parked(6);  // a, b and d
  EXPECT_EQ(state(a), "running");
  EXPECT_EQ(state(b), "running");
  EXPECT_EQ(state(d), "running");
  json vc = view(c), ve = view(e);
  EXPECT_EQ(vc["state"], "pending");
  EXPECT_EQ(vc["waiting_for"], "this peer already has 2 job(s) running (jobs.max_per_peer)");
  EXPECT_EQ(vc["queue_position"], 0);
  EXPECT_EQ(ve["state"], "pending") << "the provider's three slots are taken";
  EXPECT_EQ(ve["queue_position"], 1);
  auto started = started_jobs();
  EXPECT_EQ(std::set<std::string>(started.begin(), started.end()), (std::set<std::string>{a, b, d}));
  EXPECT_EQ(jobs_->active_jobs(PeerId("p1")), 3);
  EXPECT_EQ(jobs_->executor_status()["running"], 3);
  EXPECT_EQ(jobs_->executor_status()["queued"], 2);
}

TEST_F(ProviderJobsFakeTest, RaisingThePerPeerLimitWhileRunningStartsAWaitingJobAtOnce) {
  start_manager([](ProviderOptions& o) {
    o.max_concurrent = 4;
    o.max_per_peer = 1;
  });
  std::string a = submit("p1", {}), b = submit("p1", {});
  await_parked(2);  // a
  EXPECT_EQ(state(a), "running");
  EXPECT_EQ(state(b), "pending");
  EXPECT_EQ(jobs_->executor_status()["max_per_peer"], 1);
  jobs_->set_limits(2, 100, 20);  // `yonder config set jobs.max_per_peer 2` on a running provider
  await_parked(4);  // and b
  EXPECT_EQ(state(b), "running");
  EXPECT_EQ(jobs_->executor_status()["max_per_peer"], 2);
  // Lowered again: nothing that runs is stopped.
  jobs_->set_limits(1, 100, 20);
  EXPECT_EQ(state(a), "running");
  EXPECT_EQ(state(b), "running");
}

TEST_F(ProviderJobsFakeTest, AJobPastItsScopesJobsAtOnceWaitsNamingTheScopeAndStartsWhenOneEnds) {
  executor_.script("exit0", {.exit_after = 10s, .exit_code = 0});
  start_manager([](ProviderOptions& o) {
    o.max_concurrent = 4;
    o.max_per_peer = 4;
    o.max_queued_per_peer = 2;
  });
  // Shared with --max-jobs 1: the second job waits instead of being refused.
  std::string a = submit("p1", {{"command", {"fake", "exit0"}}}, 1), b = submit("p1", {}, 1);
  std::string other = submit("p2", {}, 1);
  await_parked(4);  // a and other
  EXPECT_EQ(state(a), "running");
  EXPECT_EQ(state(other), "running") << "another peer's limit is its own";
  json vb = view(b);
  EXPECT_EQ(vb["state"], "pending");
  EXPECT_NE(vb.value("waiting_for", "").find("the most your scope on this provider allows at once (1)"),
            std::string::npos)
      << vb.dump();
  EXPECT_EQ(vb["queue_position"], 0);
  // The queue bounds what one peer may leave waiting, and says so.
  submit("p1", {}, 1);
  auto third = jobs_->submit(PeerId("p1"), *protocol::parse_job_request({{"image", kImage}}), "", 1);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(third.error().message().find("jobs.max_queued_per_peer"), std::string::npos) << third.error().message();
  // a ends: b starts in the same pass.
  advance(10s);
  EXPECT_EQ(await_end(a)["exit_code"], 0);
  await_parked(4);  // b and other
  EXPECT_EQ(state(b), "running");
}

TEST_F(ProviderJobsFakeTest, AQueuedJobStartsWhenARunningOneExits) {
  executor_.script("exit3", {.exit_after = 10s, .exit_code = 3});
  start_manager([](ProviderOptions& o) {
    o.max_concurrent = 3;
    o.max_per_peer = 2;
  });
  std::string a = submit("p1", {{"command", {"fake", "exit3"}}}), b = submit("p1", {});
  std::string c = submit("p1", {}), d = submit("p2", {}), e = submit("p2", {});
  await_parked(6);
  advance(9s);
  EXPECT_FALSE(has_ended(a));
  advance(1s);
  json end = await_end(a);
  EXPECT_EQ(end["state"], "exited");
  EXPECT_EQ(end["reason"], "exited");
  EXPECT_EQ(end["exit_code"], 3);
  // Decided in the same pass that settled a: c (first in the queue, its
  // peer has one job less now) takes the slot; e still waits for one.
  EXPECT_NE(state(c), "pending");
  await_parked(6);  // b, c and d
  EXPECT_EQ(state(c), "running");
  EXPECT_EQ(state(e), "pending");
  EXPECT_EQ(fake_.destroyed().size(), 1u) << "the ended task's container is removed";
  EXPECT_EQ(fake_.destroyed()[0].job_id, a);
}

TEST_F(ProviderJobsFakeTest, WallTimeStopsWithSigtermThenKillsAfterTheGrace) {
  executor_.script("trap", {.ignores_signals = true});
  start_manager();
  std::string id = submit("p", {{"wall_time_s", 60}, {"command", {"fake", "trap"}}});
  await_parked(2);
  std::string task = task_of(id).task_id;
  advance(59s);
  EXPECT_EQ(state(id), "running");
  EXPECT_TRUE(fake_.signals().empty());
  advance(1s);  // the deadline: the watchdog asks for a stop
  await_parked(3);  // the stop is being carried out: TERM sent, the grace runs
  EXPECT_EQ(fake_.signals(), (std::vector<std::pair<std::string, int>>{{task, SIGTERM}}));
  EXPECT_EQ(view(id)["stopping"], "wall_time");
  advance(4s);
  EXPECT_EQ(fake_.signals().size(), 1u) << "no kill before the grace (5 s) ends";
  EXPECT_FALSE(has_ended(id));
  advance(1s);
  json end = await_end(id);
  EXPECT_EQ(end["state"], "stopped");
  EXPECT_EQ(end["reason"], "wall_time");
  EXPECT_EQ(end["message"], "stopped: the job ran past its wall-time limit of 60 s");
  EXPECT_EQ(end["exit_code"], 137);
  EXPECT_EQ(fake_.signals(), (std::vector<std::pair<std::string, int>>{{task, SIGTERM}, {task, SIGKILL}}));
  ASSERT_TRUE(jobs_->remove(JobId(id)).ok());
  EXPECT_FALSE(jobs_->get(JobId(id)).ok());
}

TEST_F(ProviderJobsFakeTest, AJobThatHonoursSigtermEndsWithoutWaitingForTheGrace) {
  start_manager();
  std::string id = submit("p", {{"wall_time_s", 30}});
  await_parked(2);
  advance(30s);
  json end = await_end(id);
  EXPECT_EQ(end["state"], "stopped");
  EXPECT_EQ(end["reason"], "wall_time");
  EXPECT_EQ(end["exit_code"], 128 + SIGTERM);
}

TEST_F(ProviderJobsFakeTest, AnOutOfMemoryKillEndsTheJobWithTheOomReason) {
  executor_.script("oom", {.exit_after = 3s, .oom_kill = true});
  start_manager();
  std::string id = submit("p", {{"memory_mib", 64}, {"command", {"fake", "oom"}}});
  await_parked(2);
  advance(3s);
  json end = await_end(id);
  EXPECT_EQ(end["state"], "exited");
  EXPECT_EQ(end["reason"], "out_of_memory");
  EXPECT_EQ(end["oom_killed"], true);
  EXPECT_EQ(end["exit_code"], 137);
  EXPECT_EQ(end["message"], "the job ran out of memory (limit 64 MiB) and was killed");
}

TEST_F(ProviderJobsFakeTest, AJobWhoseContainerVanishesEndsAsLost) {
  executor_.script("vanish", {.lost_after = 4s});
  start_manager([](ProviderOptions& o) { o.max_concurrent = 1; });
  std::string id = submit("p", {{"command", {"fake", "vanish"}}});
  std::string next = submit("q", {});
  await_parked(2);
  advance(4s);
  json end = await_end(id);
  EXPECT_EQ(end["state"], "failed");
  EXPECT_EQ(end["reason"], "lost");
  EXPECT_EQ(end["message"].get<std::string>().rfind("lost track of the job's task: ", 0), 0u) << end.dump();
  EXPECT_TRUE(end["exit_code"].is_null());
  await_parked(2);  // its slot went to the next job
  EXPECT_EQ(state(next), "running");
}

TEST_F(ProviderJobsFakeTest, AStartFailureEndsTheJobWithStartFailedAndFreesItsGpu) {
  executor_.script("refused", {.start_error = make_error(ErrorCode::kUnavailable, "the engine said no")});
  start_manager([](ProviderOptions& o) { o.max_concurrent = 1; });
  std::string bad = submit("p", {{"gpus", 2}, {"command", {"fake", "refused"}}});
  std::string next = submit("q", {{"gpus", 2}});
  json end = await_end(bad);
  EXPECT_EQ(end["state"], "failed");
  EXPECT_EQ(end["reason"], "start_failed");
  EXPECT_NE(end["message"].get<std::string>().find("the engine said no"), std::string::npos) << end.dump();
  await_parked(2);  // the next job got the slot and both devices
  EXPECT_EQ(state(next), "running");
  EXPECT_EQ(view(next)["gpus"], end["gpus"]);
  EXPECT_EQ(leases(), 2u);
  EXPECT_EQ(started_jobs(), std::vector<std::string>{next}) << "the failed start left no task";
}

TEST_F(ProviderJobsFakeTest, GpuLeasesAreHeldWhileRunningReleasedAtTheEndNeverGivenTwice) {
  executor_.script("exit5", {.exit_after = 5s});
  start_manager();
  std::string a = submit("p1", {{"gpus", 1}}), b = submit("p2", {{"gpus", 1}, {"command", {"fake", "exit5"}}});
  std::string c = submit("p3", {{"gpus", 1}}), d = submit("p4", {{"gpus", 1}});
  await_parked(4);
  json va = view(a), vb = view(b);
  ASSERT_EQ(va["gpus"].size(), 1u);
  ASSERT_EQ(vb["gpus"].size(), 1u);
  EXPECT_NE(va["gpus"][0], vb["gpus"][0]);
  EXPECT_TRUE(va["fake_gpus"].get<bool>());
  EXPECT_EQ(view(c)["waiting_for"], "waiting for a GPU held by another job");
  EXPECT_EQ(view(d)["state"], "pending");
  EXPECT_EQ(leases(), 2u);
  // The devices the engine was asked for are the leased ones, simulated.
  for (const auto& spec : fake_.started()) {
    EXPECT_TRUE(spec.simulate_gpus);
    EXPECT_EQ(json(spec.gpu_uuids), view(spec.job_id)["gpus"]);
  }

  ASSERT_TRUE(jobs_->stop(JobId(a)).ok());
  json end_a = await_end(a);
  EXPECT_EQ(end_a["state"], "stopped");
  EXPECT_EQ(end_a["gpus"], va["gpus"]) << "an ended job still says which devices it had";
  EXPECT_EQ(end_a["gpu_model"], "FAKE GPU");
  EXPECT_EQ(end_a.value("output_sha256", "").size(), 64u);
  await_parked(4);  // b and c
  EXPECT_EQ(view(c)["gpus"], va["gpus"]) << "the freed device went to the first waiting job";
  EXPECT_EQ(state(d), "pending");
  EXPECT_EQ(leases(), 2u);

  advance(5s);  // b exits by itself
  EXPECT_EQ(await_end(b)["exit_code"], 0);
  await_parked(4);  // c and d
  EXPECT_EQ(view(d)["gpus"], vb["gpus"]);
  EXPECT_NE(view(c)["gpus"], view(d)["gpus"]);
  ASSERT_TRUE(jobs_->stop(JobId(c)).ok());
  ASSERT_TRUE(jobs_->stop(JobId(d)).ok());
  await_end(c);
  await_end(d);
  EXPECT_EQ(leases(), 0u);
  // No two starts ever held one device at once: each device was handed out
  // again only after the job holding it ended (four starts, two devices).
  EXPECT_EQ(fake_.started().size(), 4u);
}

TEST_F(ProviderJobsFakeTest, AJobThatCanNeverFitIsRefusedAtSubmit) {
  start_manager();
  auto three = jobs_->submit(PeerId("p"), *parse_job_request({{"image", kImage}, {"gpus", 3}}));
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(three.error().message().find("only 2 such GPU(s)"), std::string::npos) << three.error().message();
  auto vram = jobs_->submit(PeerId("p"), *parse_job_request({{"image", kImage}, {"gpus", 1}, {"vram_mib", 80000}}));
  ASSERT_FALSE(vram.ok());
  EXPECT_NE(vram.error().message().find("80000 MiB"), std::string::npos) << vram.error().message();
  EXPECT_TRUE(jobs_->list()->empty()) << "nothing was queued";
  EXPECT_TRUE(fake_.started().empty());
}

// The node's credits order the queue (tit-for-tat, jobs/metering/credits.h) through
// set_queue_order: a later job of a favoured peer starts first.
TEST_F(ProviderJobsFakeTest, AQueueOrderPolicyDecidesWhoStartsFirst) {
  start_manager();
  std::string holder = submit("h", {{"gpus", 2}});
  await_parked(2);
  std::string debtor = submit("debtor", {{"gpus", 2}});
  std::string friendly = submit("friend", {{"gpus", 2}});
  EXPECT_EQ(view(debtor)["queue_position"], 0);
  jobs_->set_queue_order([](const std::vector<ProviderJobs::QueuedJob>& q) {
    std::vector<std::string> out;
    for (const auto& j : q) {
      if (j.peer_id == "friend") {
        out.insert(out.begin(), j.job_id);
      } else {
        out.push_back(j.job_id);
      }
    }
    return out;
  });
  EXPECT_EQ(view(friendly)["queue_position"], 0);
  EXPECT_EQ(view(debtor)["queue_position"], 1);
  ASSERT_TRUE(jobs_->stop(JobId(holder)).ok());
  json ended = await_end(holder);
  await_parked(2);
  EXPECT_EQ(state(friendly), "running");
  EXPECT_EQ(state(debtor), "pending");
  // What a metering receipt needs (mesh/core/metering.h): the model and the output's hash.
  EXPECT_EQ(ended["gpu_model"], "FAKE GPU");
  EXPECT_EQ(ended["gpus"].size(), 2u);
  EXPECT_EQ(ended.value("output_sha256", "").size(), 64u);
}

TEST_F(ProviderJobsFakeTest, VramOverTheLimitStopsTheJobWithTheReason) {
  start_manager();
  std::string id = submit("p", {{"gpus", 1}, {"vram_mib", 1024}});
  await_parked(2);
  std::string uuid = view(id)["gpus"][0];
  auto st = fake_.inspect(task_of(id).handle);
  ASSERT_TRUE(st.ok() && st->pid > 0);
  gpus_.simulate_process(uuid, 999999, 8ULL << 30);  // another process's use is not the job's
  gpus_.simulate_process(uuid, st->pid, 2ULL << 30);
  advance(2s);  // the next sample (vram_interval)
  json end = await_end(id);
  EXPECT_EQ(end["state"], "stopped");
  EXPECT_EQ(end["reason"], "vram_exceeded");
  EXPECT_NE(end["message"].get<std::string>().find("used 2048 MiB of GPU memory on " + uuid +
                                                   ", over its limit of 1024 MiB"),
            std::string::npos)
      << end.dump();
}

// gpu.share (gpu_shares.h): shares pack onto one device with their VRAM
// budgets, the task gets its device and budget (the executor preloads the
// guard with it), a whole-GPU job takes the other device, and the next one
// waits until the shares end.
TEST_F(ProviderJobsFakeTest, SharesOfAGpuRunTogetherWithTheirBudgetsAndAWholeGpuJobWaitsForTheirDevice) {
  start_manager([](ProviderOptions& o) { o.gpu_shares = *parse_share_setting("all:2:4G"); });
  std::string a = submit("p1", {{"share_vram_mib", 8192}});
  std::string b = submit("p2", {{"share_permille", 250}});  // a quarter of 24 GiB: 6 GiB
  await_parked(4);
  json va = view(a), vb = view(b);
  ASSERT_EQ(va["state"], "running") << va.dump();
  ASSERT_EQ(vb["state"], "running") << vb.dump();
  EXPECT_EQ(va["share"]["gpu"], vb["share"]["gpu"]) << "best fit: the second share packs onto the first's device";
  EXPECT_EQ(va["share"]["vram_bytes"], 8ULL << 30);
  EXPECT_EQ(vb["share"]["vram_bytes"], 6ULL << 30);
  EXPECT_EQ(va["share"]["permille"], 334) << "8 of 24 GiB, rounded up: what its receipt meters";
  EXPECT_EQ(vb["share"]["permille"], 250);
  EXPECT_TRUE(va["gpus"].empty()) << "a share leases no whole GPU";
  EXPECT_EQ(leases(), 0u);
  std::string shared_gpu = va["share"]["gpu"];
  EXPECT_EQ(jobs_->executor_status()["shares"][shared_gpu].size(), 2u);
  json offered = jobs_->offer()["shared"][shared_gpu];
  EXPECT_EQ(offered["jobs"], 2);
  EXPECT_EQ(offered["vram_bytes"], 14ULL << 30);
  EXPECT_FALSE(offered.contains("job_id")) << "an offer names no job";
  for (const auto& spec : fake_.started()) {
    EXPECT_EQ(spec.gpu_uuids, std::vector<std::string>{va["share"]["gpu"].get<std::string>()});
    EXPECT_EQ(spec.vram_budget_bytes, view(spec.job_id)["share"]["vram_bytes"].get<uint64_t>());
  }
  // A third share: two at once per device, so it takes the other device.
  std::string c = submit("p3", {{"share_vram_mib", 1024}});
  await_parked(6);
  EXPECT_NE(view(c)["share"]["gpu"], va["share"]["gpu"]);
  // A whole-GPU job: both devices have shares, so it waits, and holds one
  // back from new shares.
  std::string whole = submit("p4", {{"gpus", 1}});
  json w = view(whole);
  EXPECT_EQ(w["state"], "pending");
  EXPECT_NE(w.value("waiting_for", "").find("no new shares start on the GPU(s) it will get"), std::string::npos)
      << w.dump();
  ASSERT_TRUE(jobs_->stop(JobId(c)).ok());
  await_end(c);
  await_parked(6);  // a, b and the whole-GPU job
  EXPECT_EQ(state(whole), "running");
  EXPECT_EQ(view(whole)["gpus"][0], view(c)["share"]["gpu"]) << "it got the device the share left";
  EXPECT_EQ(leases(), 1u);
}

TEST_F(ProviderJobsFakeTest, AShareIsRefusedAtSubmitWhenNoGpuIsSharedOrNoneCouldHoldIt) {
  start_manager();  // no gpu.share
  auto none = jobs_->submit(PeerId("p"), *parse_job_request({{"image", kImage}, {"share_vram_mib", 1024}}));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("shares none of its GPUs (the provider sets gpu.share)"), std::string::npos)
      << none.error().message();
  stop_manager();
  start_manager([](ProviderOptions& o) { o.gpu_shares = *parse_share_setting("all:4:20G"); });
  auto big = jobs_->submit(PeerId("p"), *parse_job_request({{"image", kImage}, {"share_vram_mib", 8192}}));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("the most a shared GPU here holds is 4096 MiB"), std::string::npos)
      << big.error().message();
  EXPECT_TRUE(jobs_->list()->empty()) << "nothing was queued";
}

// The VRAM watch is the last line behind the guard: a share whose
// processes hold more than its budget (a job that dropped the guard) is
// stopped like a whole-GPU job over its limit.
TEST_F(ProviderJobsFakeTest, AShareOverItsBudgetIsStoppedByTheVramWatch) {
  start_manager([](ProviderOptions& o) { o.gpu_shares = *parse_share_setting("all:2"); });
  std::string id = submit("p", {{"share_vram_mib", 1024}});
  await_parked(2);
  std::string uuid = view(id)["share"]["gpu"];
  auto st = fake_.inspect(task_of(id).handle);
  ASSERT_TRUE(st.ok() && st->pid > 0);
  gpus_.simulate_process(uuid, 999999, 8ULL << 30);  // another tenant's use is not the job's
  gpus_.simulate_process(uuid, st->pid, 3ULL << 30);
  advance(2s);
  json end = await_end(id);
  EXPECT_EQ(end["reason"], "vram_exceeded");
  EXPECT_NE(end["message"].get<std::string>().find("used 3072 MiB of GPU memory on " + uuid +
                                                   ", over its limit of 1024 MiB"),
            std::string::npos)
      << end.dump();
  EXPECT_EQ(end["share"]["gpu"], uuid) << "an ended share still says where it ran";
}

TEST_F(ProviderJobsFakeTest, StatsAreARunningJobsUseWithItsOwnProcessesVramOnly) {
  start_manager();
  std::string id =
      submit("p", {{"gpus", 1}, {"vram_mib", 4096}, {"memory_mib", 512}, {"cpus", 0.5}, {"wall_time_s", 30}});
  await_parked(2);
  std::string uuid = view(id)["gpus"][0];
  auto st = fake_.inspect(task_of(id).handle);
  ASSERT_TRUE(st.ok() && st->pid > 0);
  fake_.set_stats(task_of(id).handle.task_id, exec::TaskStats{300ULL << 20, 7'000'000'000ULL, 12});
  gpus_.simulate_process(uuid, 999999, 8ULL << 30);  // another process's use is not the job's
  gpus_.simulate_process(uuid, st->pid, 3ULL << 30);
  auto s = jobs_->stats(JobId(id));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ((*s)["memory_bytes"], 300ULL << 20);
  EXPECT_EQ((*s)["memory_limit_bytes"], 512LL << 20);
  EXPECT_EQ((*s)["cpu_total_ns"], 7'000'000'000ULL);
  EXPECT_DOUBLE_EQ((*s)["cpus"].get<double>(), 0.5);
  EXPECT_EQ((*s)["pids"], 12);
  EXPECT_EQ((*s)["sampled_at_ms"], std::chrono::duration_cast<std::chrono::milliseconds>(
                                       clock_.now().time_since_epoch()).count());  // the injected clock
  ASSERT_EQ((*s)["gpus"].size(), 1u);
  EXPECT_EQ((*s)["gpus"][0]["uuid"], uuid);
  EXPECT_EQ((*s)["gpus"][0]["vram_used_bytes"], 3ULL << 30);
  EXPECT_EQ((*s)["gpus"][0]["vram_limit_bytes"], 4096ULL << 20);
  EXPECT_EQ((*s)["gpus"][0]["vram_total_bytes"], 24ULL << 30);
  // Not running: refused, naming the state.
  advance(30s);  // its wall time: stopped
  await_end(id);
  auto ended = jobs_->stats(JobId(id));
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(ended.error().message().find("stats are for a running job"), std::string::npos);
  EXPECT_EQ(jobs_->stats(JobId("nope")).error().code(), ErrorCode::kNotFound);
}

TEST_F(ProviderJobsFakeTest, TimesInTheJobsRecordComeFromTheInjectedClock) {
  executor_.script("exit", {.exit_after = 90s});
  start_manager();
  std::string id = submit("p", {{"command", {"fake", "exit"}}});
  EXPECT_EQ(view(id)["created_at"], unix_seconds(kEpoch));
  await_parked(2);
  EXPECT_EQ(view(id)["started_at"], unix_seconds(kEpoch));
  advance(90s);
  json end = await_end(id);
  EXPECT_EQ(end["finished_at"], unix_seconds(kEpoch) + 90);
  EXPECT_EQ(end["updated_at"], unix_seconds(kEpoch) + 90);
}

TEST_F(ProviderJobsFakeTest, RecoveryReattachesRunningTasksMarksVanishedOnesAndRemovesOrphans) {
  executor_.script("exit100", {.exit_after = 100s, .exit_code = 7});
  start_manager([](ProviderOptions& o) { o.max_concurrent = 2; });
  std::string a = submit("p", {{"command", {"fake", "exit100"}}});
  std::string b = submit("q", {});
  std::string c = submit("r", {});
  await_parked(4);
  EXPECT_EQ(state(c), "pending");
  std::string task_a = task_of(a).task_id;
  advance(10s);

  stop_manager();  // the daemon goes; the engine keeps its tasks
  EXPECT_EQ(task_of(a).task_id, task_a) << "a shutdown stops watching, not the jobs";
  ASSERT_TRUE(fake_.lose(task_of(b).task_id));  // someone ran `docker rm -f` meanwhile
  exec::TaskSpec orphan;
  orphan.job_id = "orphan";
  orphan.image = kImage;
  ASSERT_TRUE(fake_.start(orphan).ok());  // a task labelled as ours that no job claims
  advance(10s);

  start_manager([](ProviderOptions& o) { o.max_concurrent = 2; });
  json end_b = await_end(b);
  EXPECT_EQ(end_b["state"], "failed");
  EXPECT_EQ(end_b["reason"], "lost");
  EXPECT_EQ(end_b["message"], "the job's container disappeared while yonderd was not running");
  await_parked(4);  // a re-adopted, and c in the slot b held
  EXPECT_EQ(state(a), "running");
  EXPECT_EQ(state(c), "running");
  EXPECT_EQ(view(a)["started_at"], unix_seconds(kEpoch)) << "the first start, not the re-adoption";
  bool orphan_removed = false;
  for (const auto& call : fake_.destroyed()) orphan_removed = orphan_removed || call.job_id == "orphan";
  EXPECT_TRUE(orphan_removed);

  advance(80s);  // a's own exit, 100 s after its start
  json end_a = await_end(a);
  EXPECT_EQ(end_a["state"], "exited");
  EXPECT_EQ(end_a["exit_code"], 7);
  std::vector<std::string> started = started_jobs();
  EXPECT_EQ(std::count(started.begin(), started.end(), a), 1) << "re-attached, never started again";
}

TEST_F(ProviderJobsFakeTest, ARecoveredJobKeepsItsWallTimeDeadline) {
  start_manager();
  std::string id = submit("p", {{"wall_time_s", 30}});
  await_parked(2);
  advance(20s);
  stop_manager();
  start_manager();
  await_parked(2);
  EXPECT_EQ(state(id), "running");
  advance(9s);
  EXPECT_FALSE(has_ended(id));
  advance(1s);  // 30 s after the first start, however long the restart took
  json end = await_end(id);
  EXPECT_EQ(end["state"], "stopped");
  EXPECT_EQ(end["reason"], "wall_time");
}

// Descriptors open on job logs under the jobs folder, in this process.
int open_job_logs(const std::string& jobs_dir) {
  int n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code lec;
    auto target = std::filesystem::read_symlink(it->path(), lec).string();
    n += !lec && target.rfind(jobs_dir + "/", 0) == 0 && target.find("output.log") != std::string::npos;
  }
  return n;
}

// A long-lived provider runs thousands of jobs: neither a queued job that
// someone follows nor every finished one may hold its log open.
TEST_F(ProviderJobsFakeTest, QueuedAndFinishedJobsDoNotEachHoldTheirLogOpen) {
  executor_.script("b", {.output = {{0s, exec::LogStream::kStdout, "b\n"}}});
  start_manager([](ProviderOptions& o) {
    o.max_per_peer = 1;
    o.max_queued_per_peer = 100;  // one peer's 40 jobs wait
  });
  const std::string jobs_dir = dir_ / "jobs";
  std::string blocker = submit("p", {{"command", {"fake", "b"}}});
  await_log(blocker);
  std::vector<std::string> queued;
  for (int i = 0; i < 40; ++i) queued.push_back(submit("p", {}));
  for (const auto& id : queued) {
    auto read = jobs_->read_log(JobId(id), 0, 1024);  // a follower of a queued job
    ASSERT_TRUE(read.ok());
    EXPECT_TRUE(read->slice.records.empty());
    EXPECT_FALSE(read->ended);
    ASSERT_TRUE(jobs_->watch_log(JobId(id), 0, [] {}).ok());
  }
  EXPECT_EQ(open_job_logs(jobs_dir), 1) << "only the running job's log";
  for (const auto& id : queued) ASSERT_TRUE(jobs_->stop(JobId(id)).ok());
  int open = open_job_logs(jobs_dir);
  EXPECT_GT(open, 1);
  EXPECT_LE(open, 1 + 32);
  // A closed log opens again to be read, and the view still tells its size.
  auto first = jobs_->read_log(JobId(queued.front()), 0, 1024);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->ended);
  EXPECT_LE(open_job_logs(jobs_dir), 1 + 32);
  ASSERT_TRUE(jobs_->stop(JobId(blocker)).ok());
  json ended = await_end(blocker);
  EXPECT_GT(ended.value("log_bytes", 0), 0);
  for (const auto& id : queued) (void)jobs_->read_log(JobId(id), 0, 1024);  // pushes the blocker's log out
  json later = view(blocker);
  EXPECT_EQ(later.value("log_bytes", 0), ended.value("log_bytes", 1));
  EXPECT_EQ(output(blocker), "b\n");
}

// A follower of a quiet job leaves a waiter per timed-out poll: their number
// stays bounded, the oldest woken early, and the rest still wake at the end.
TEST_F(ProviderJobsFakeTest, WaitersOnAQuietLogStayBounded) {
  executor_.script("quiet", {.output = {{0s, exec::LogStream::kStdout, "start\n"}}});
  start_manager();
  std::string id = submit("p", {{"command", {"fake", "quiet"}}});
  await_log(id);
  auto log = jobs_->read_log(JobId(id), 0, 1024);
  ASSERT_TRUE(log.ok());
  uint64_t end = log->slice.next_offset;
  auto woken = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(jobs_->watch_log(JobId(id), end, [woken] { ++*woken; }).ok());
  }
  EXPECT_EQ(woken->load(), 300 - 256) << "the oldest beyond the bound are woken early";
  ASSERT_TRUE(jobs_->stop(JobId(id)).ok());
  await_end(id);
  EXPECT_EQ(woken->load(), 300) << "the others wake when the job ends";
}

}  // namespace
}  // namespace yonder::jobs::provider
