// The provider queue's pure core (queue_core.h): examples of each rule of
// its policy, then properties over seeded random snapshots, checked against
// brute-force references; and a check that the core stays pure.
#include "jobs/provider/queue_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>

#include "support/core_purity.h"

namespace yonder::jobs::provider {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kGiB = 1ULL << 30;
const MonoTime kNow = MonoTime{} + 1000h;

GpuView two_gpus() {
  GpuView v;
  v.usable = true;
  v.devices = {{"GPU-0", "FAKE GPU", 24 * kGiB}, {"GPU-1", "FAKE GPU", 24 * kGiB}};
  return v;
}

WaitingJob job(const std::string& id, const std::string& peer, int gpus = 0, uint64_t disk = 0) {
  return {id, peer, gpus, 0, disk, 0, false, {}, std::nullopt};
}

ActiveJob running(const std::string& id, const std::string& peer, std::vector<std::string> uuids = {}) {
  ActiveJob a;
  a.job_id = id;
  a.peer_id = peer;
  a.running = true;
  a.gpu_uuids = std::move(uuids);
  return a;
}

template <typename T>
std::vector<T> all_of_kind(const QueuePlan& plan) {
  std::vector<T> out;
  for (const auto& a : plan.actions) {
    if (const auto* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

std::string decision_of_first_wait(const QueuePlan& plan) {
  auto waits = all_of_kind<WaitJob>(plan);
  return waits.empty() ? "" : waits[0].reason;
}

std::vector<std::string> started_ids(const QueuePlan& plan) {
  std::vector<std::string> out;
  for (const auto& s : all_of_kind<StartJob>(plan)) out.push_back(s.job_id);
  return out;
}

// ---- Examples, one per rule ----

TEST(QueueCore, StartsInSubmitOrderUpToMaxConcurrentAndLooksNoFurther) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = 2;
  s.max_per_peer = 10;
  for (int i = 0; i < 5; ++i) s.queue.push_back(job("j" + std::to_string(i), "p"));
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"j0", "j1"}));
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"j2", "j3", "j4"}));
  EXPECT_TRUE(all_of_kind<WaitJob>(plan).empty()) << "jobs past the limit are not looked at";
  EXPECT_FALSE(plan.next_deadline);
}

TEST(QueueCore, APeerAtItsLimitWaitsAndTheJobsBehindItStart) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_per_peer = 1;
  s.active = {running("a", "p")};
  s.queue = {job("p2", "p"), job("q1", "q")};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"q1"}));
  auto waits = all_of_kind<WaitJob>(plan);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].job_id, "p2");
  EXPECT_EQ(waits[0].reason, "this peer already has 1 job(s) running (jobs.max_per_peer)");
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"p2"}));
}

TEST(QueueCore, APeerOverItsScopesLimitWaitsWithTheScopeNamedNotRefused) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_per_peer = 4;
  s.active = {running("a", "p")};
  WaitingJob second = job("p2", "p");
  second.peer_limit = 1;  // shared with --max-jobs 1
  WaitingJob other = job("q1", "q");
  other.peer_limit = 1;
  s.queue = {second, other};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"q1"}));
  EXPECT_TRUE(all_of_kind<RefuseJob>(plan).empty());
  auto waits = all_of_kind<WaitJob>(plan);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].job_id, "p2");
  EXPECT_NE(waits[0].reason.find("1 of your jobs are starting or running"), std::string::npos) << waits[0].reason;
  EXPECT_NE(waits[0].reason.find("--max-jobs"), std::string::npos) << waits[0].reason;
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"p2"}));
  // When the running one has ended, it starts.
  s.active.clear();
  s.queue = {second};
  EXPECT_EQ(started_ids(plan_queue(s)), (std::vector<std::string>{"p2"}));
  // A scope wider than the provider's own limit changes nothing.
  second.peer_limit = 9;
  s.max_per_peer = 1;
  s.active = {running("a", "p")};
  s.queue = {second};
  auto wider = all_of_kind<WaitJob>(plan_queue(s));
  ASSERT_EQ(wider.size(), 1u);
  EXPECT_NE(wider[0].reason.find("jobs.max_per_peer"), std::string::npos);
}

TEST(QueueCore, AGpuJobWaitsForAHeldGpuWhileACpuJobBehindItStarts) {
  QueueSnapshot s;
  s.now = kNow;
  s.gpus = two_gpus();
  s.active = {running("a", "p1", {"GPU-0"}), running("b", "p2", {"GPU-1"})};
  s.queue = {job("gpu", "p3", 1), job("cpu", "p4")};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"cpu"}));
  ASSERT_EQ(all_of_kind<WaitJob>(plan).size(), 1u);
  EXPECT_EQ(all_of_kind<WaitJob>(plan)[0].reason, "waiting for a GPU held by another job");
}

TEST(QueueCore, StartsOnTheFirstFreeDevicesAndNamesTheirModel) {
  QueueSnapshot s;
  s.now = kNow;
  s.gpus = two_gpus();
  s.gpus->devices.push_back({"GPU-2", "FAKE BIG", 80 * kGiB});
  s.active = {running("a", "p1", {"GPU-0"})};
  s.queue = {job("two", "p2", 2)};
  QueuePlan plan = plan_queue(s);
  auto starts = all_of_kind<StartJob>(plan);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].gpu_uuids, (std::vector<std::string>{"GPU-1", "GPU-2"}));
  EXPECT_EQ(starts[0].gpu_model, "FAKE GPU+FAKE BIG");
}

TEST(QueueCore, AJobThatCanNeverFitIsRefusedWithAReasonAndLeavesTheQueue) {
  QueueSnapshot s;
  s.now = kNow;
  s.gpus = two_gpus();
  s.queue = {job("three", "p", 3), job("big", "p", 1), job("ok", "q", 1)};
  s.queue[1].vram_bytes = 40 * kGiB;
  QueuePlan plan = plan_queue(s);
  auto refused = all_of_kind<RefuseJob>(plan);
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].job_id, "three");
  EXPECT_NE(refused[0].reason.find("only 2 such GPU(s)"), std::string::npos) << refused[0].reason;
  EXPECT_NE(refused[1].reason.find("40960 MiB each"), std::string::npos) << refused[1].reason;
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"ok"}));
  EXPECT_TRUE(plan.queue.empty());
}

TEST(QueueCore, NoGpusToLendRefusesGpuJobsButStartsCpuJobs) {
  QueueSnapshot s;
  s.now = kNow;
  s.gpus = GpuView{false, "no NVIDIA driver", {}};
  s.queue = {job("gpu", "p", 1), job("cpu", "p")};
  QueuePlan plan = plan_queue(s);
  ASSERT_EQ(all_of_kind<RefuseJob>(plan).size(), 1u);
  EXPECT_EQ(all_of_kind<RefuseJob>(plan)[0].reason,
            "this job asks for 1 GPU(s) but this provider has none to lend: no NVIDIA driver");
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"cpu"}));
}

TEST(QueueCore, WithoutTheDevicesAGpuJobWaits) {
  QueueSnapshot s;
  s.now = kNow;
  s.queue = {job("gpu", "p", 1)};
  QueuePlan plan = plan_queue(s);
  ASSERT_EQ(all_of_kind<WaitJob>(plan).size(), 1u);
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"gpu"}));
}

TEST(QueueCore, DiskPromisesCountAgainstTheJobsBehindInTheSamePass) {
  QueueSnapshot s;
  s.now = kNow;
  s.disk = DiskSnapshot{};
  s.disk->free_bytes = 10 * kGiB;
  s.disk->reserve_bytes = 1 * kGiB;
  s.queue = {job("a", "p1", 0, 5 * kGiB), job("b", "p2", 0, 5 * kGiB), job("c", "p3", 0, 4 * kGiB),
             job("huge", "p4", 0, 20 * kGiB)};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"a", "c"}));
  auto waits = all_of_kind<WaitJob>(plan);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].job_id, "b");
  EXPECT_EQ(waits[0].reason.rfind("disk:", 0), 0u) << waits[0].reason;
  auto refused = all_of_kind<RefuseJob>(plan);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].job_id, "huge");
  EXPECT_NE(refused[0].reason.find("--disk"), std::string::npos);
}

TEST(QueueCore, TheOrderPolicyPutsItsJobsFirstAndTheRestKeepTheirOrder) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = 0;  // nothing starts: only the order is decided
  s.queue = {job("a", "p"), job("b", "p"), job("c", "p"), job("d", "p")};
  s.preferred_order = std::vector<std::string>{"c", "nobody", "a", "c"};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(plan.order, (std::vector<std::string>{"c", "a", "b", "d"}));
  EXPECT_EQ(plan.queue, plan.order);
  EXPECT_TRUE(plan.actions.empty());
}

// Backfill without reservation: the two-GPU head waits for one device while
// the one-GPU job behind it takes the other; the head is still decided first.
TEST(QueueCore, BackfillDoesNotReserveDevicesForTheHead) {
  QueueSnapshot s;
  s.now = kNow;
  s.gpus = two_gpus();
  s.active = {running("a", "p1", {"GPU-0"})};
  s.queue = {job("head", "p2", 2), job("small", "p3", 1)};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"small"}));
  ASSERT_EQ(all_of_kind<WaitJob>(plan).size(), 1u);
  EXPECT_EQ(all_of_kind<WaitJob>(plan)[0].job_id, "head");
  // Once the device is free at the head's turn, the head gets both.
  s.active.clear();
  EXPECT_EQ(started_ids(plan_queue(s)), (std::vector<std::string>{"head"}));
}

TEST(QueueCore, ARunningJobPastItsWallTimeIsStoppedOnceAndTheNextDeadlineIsTheEarliest) {
  QueueSnapshot s;
  s.now = kNow;
  ActiveJob late = running("late", "p");
  late.deadline = kNow - 1s;
  late.wall_time_s = 60;
  ActiveJob soon = running("soon", "p");
  soon.deadline = kNow + 5s;
  ActiveJob later = running("later", "p");
  later.deadline = kNow + 50s;
  ActiveJob stopping = running("stopping", "p");
  stopping.deadline = kNow - 10s;
  stopping.stopping = true;
  ActiveJob starting = running("starting", "p");
  starting.running = false;
  s.active = {later, late, stopping, soon, starting};
  QueuePlan plan = plan_queue(s);
  ASSERT_EQ(plan.actions.size(), 1u);
  EXPECT_EQ(std::get<StopJob>(plan.actions[0]),
            (StopJob{"late", "wall_time", "stopped: the job ran past its wall-time limit of 60 s"}));
  EXPECT_EQ(plan.next_deadline, kNow + 5s);
}

TEST(QueueCore, VramIsSampledOnlyWhileAJobHasALimitOnLeasedDevices) {
  QueueSnapshot s;
  s.now = kNow;
  s.vram_sample_at = kNow + 2s;
  ActiveJob cpu = running("cpu", "p");
  cpu.vram_limited = true;  // a limit, but no devices
  s.active = {cpu};
  EXPECT_FALSE(plan_queue(s).next_deadline);
  ActiveJob gpu = running("gpu", "p", {"GPU-0"});
  gpu.vram_limited = true;
  s.active.push_back(gpu);
  EXPECT_EQ(plan_queue(s).next_deadline, kNow + 2s);
  s.vram_sample_at = kNow;
  QueuePlan due = plan_queue(s);
  ASSERT_EQ(due.actions.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<SampleVram>(due.actions[0]));
  EXPECT_FALSE(due.next_deadline);
}

TEST(QueueCore, ASweepRunsWhenAskedForOrWhenItsTimeComes) {
  QueueSnapshot s;
  s.now = kNow;
  s.sweep_at = kNow + 30s;
  EXPECT_TRUE(plan_queue(s).actions.empty());
  EXPECT_EQ(plan_queue(s).next_deadline, kNow + 30s);
  s.sweep_requested = true;
  EXPECT_EQ(plan_queue(s).actions, (std::vector<QueueAction>{SweepDisk{}}));
  s.sweep_requested = false;
  s.sweep_at = kNow;
  EXPECT_EQ(plan_queue(s).actions, (std::vector<QueueAction>{SweepDisk{}}));
}

TEST(QueueCore, StopsComeFirstThenTheQueueThenTheTimers) {
  QueueSnapshot s;
  s.now = kNow;
  ActiveJob late = running("late", "p", {"GPU-0"});
  late.deadline = kNow;
  ActiveJob watched = running("watched", "p", {"GPU-1"});
  watched.vram_limited = true;
  s.active = {watched, late};
  s.queue = {job("next", "q")};
  s.vram_sample_at = kNow;
  s.sweep_requested = true;
  QueuePlan plan = plan_queue(s);
  ASSERT_EQ(plan.actions.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<StopJob>(plan.actions[0]));
  EXPECT_TRUE(std::holds_alternative<StartJob>(plan.actions[1]));
  EXPECT_TRUE(std::holds_alternative<SweepDisk>(plan.actions[2]));
  EXPECT_TRUE(std::holds_alternative<SampleVram>(plan.actions[3]));
}

TEST(QueueCore, AHeldJobWaitsSayingHowToReleaseItAndTheJobsBehindItStart) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = 1;
  WaitingJob held = job("held", "p");
  held.held = true;
  s.queue = {held, job("next", "p")};
  QueuePlan plan = plan_queue(s);
  EXPECT_EQ(started_ids(plan), (std::vector<std::string>{"next"}));
  EXPECT_EQ(decision_of_first_wait(plan), "held: it starts once released (yonder release held)");
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"held"}));
  held.held = false;  // released
  s.queue = {held};
  EXPECT_EQ(started_ids(plan_queue(s)), (std::vector<std::string>{"held"}));
}

TEST(QueueCore, AnAfterOkJobWaitsForItsJobToSucceedAndCanNeverStartIfItFailed) {
  QueueSnapshot s;
  s.now = kNow;
  WaitingJob next = job("next", "p");
  next.after = {Dependency{"first", true, Dependency::State::kPending, ""}};
  s.queue = {next};
  QueuePlan plan = plan_queue(s);
  EXPECT_TRUE(started_ids(plan).empty());
  EXPECT_EQ(decision_of_first_wait(plan), "waiting for job first to succeed (--after-ok)");

  s.queue[0].after[0].state = Dependency::State::kSucceeded;
  EXPECT_EQ(started_ids(plan_queue(s)), (std::vector<std::string>{"next"}));

  s.queue[0].after[0].state = Dependency::State::kFailed;
  s.queue[0].after[0].how = "exited with 3";
  plan = plan_queue(s);
  auto refused = all_of_kind<RefuseJob>(plan);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].code, "dependency_failed");
  EXPECT_NE(refused[0].reason.find("job first did not succeed (exited with 3)"), std::string::npos) << refused[0].reason;
  EXPECT_TRUE(plan.queue.empty()) << "it leaves the queue";
}

TEST(QueueCore, AnAfterJobStartsOnceItsJobEndedHowever) {
  QueueSnapshot s;
  s.now = kNow;
  WaitingJob next = job("next", "p");
  next.after = {Dependency{"a", false, Dependency::State::kFailed, "stopped"},
                Dependency{"b", false, Dependency::State::kPending, ""}};
  s.queue = {next};
  EXPECT_EQ(decision_of_first_wait(plan_queue(s)), "waiting for job b to end (--after)");
  s.queue[0].after[1].state = Dependency::State::kSucceeded;
  EXPECT_EQ(started_ids(plan_queue(s)), (std::vector<std::string>{"next"}));
}

TEST(QueueCore, ADeadDependencyEndsTheJobAtOnceEvenWhenTheProviderIsFull) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = 1;
  s.active = {running("busy", "q")};
  WaitingJob orphan = job("orphan", "p");
  orphan.after = {Dependency{"gone", true, Dependency::State::kGone, ""}};
  s.queue = {job("first", "p"), orphan};
  QueuePlan plan = plan_queue(s);
  ASSERT_EQ(all_of_kind<RefuseJob>(plan).size(), 1u);
  EXPECT_NE(all_of_kind<RefuseJob>(plan)[0].reason.find("no longer known here"), std::string::npos);
  EXPECT_EQ(plan.queue, (std::vector<std::string>{"first"}));
}

// ---- Properties over seeded random snapshots ----

QueueSnapshot random_snapshot(std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const std::string peers[] = {"p0", "p1", "p2", "p3"};
  const uint64_t mems[] = {16 * kGiB, 24 * kGiB, 80 * kGiB};
  const char* names[] = {"FAKE A", "FAKE B", ""};
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = static_cast<int>(pick(7));
  s.max_per_peer = 1 + static_cast<int>(pick(3));
  GpuView gpus;
  gpus.usable = pick(10) != 0;
  if (!gpus.usable) gpus.unusable_reason = "no driver";
  size_t devices = pick(6);
  for (size_t i = 0; i < devices; ++i) {
    gpus.devices.push_back({"GPU-" + std::to_string(i), names[pick(3)], mems[pick(3)]});
  }
  if (pick(20) != 0) s.gpus = gpus;
  std::vector<std::string> free;
  for (const auto& d : gpus.devices) free.push_back(d.uuid);
  std::shuffle(free.begin(), free.end(), rng);
  size_t active = pick(6);
  for (size_t i = 0; i < active; ++i) {
    ActiveJob a;
    a.job_id = "a" + std::to_string(i);
    a.peer_id = peers[pick(4)];
    a.running = pick(4) != 0;
    a.stopping = pick(5) == 0;
    if (a.running && pick(4) != 0) a.deadline = kNow + std::chrono::seconds(static_cast<int64_t>(pick(40)) - 10);
    a.wall_time_s = static_cast<int64_t>(pick(3600));
    for (size_t g = pick(3); g > 0 && !free.empty(); --g) {
      a.gpu_uuids.push_back(free.back());
      free.pop_back();
    }
    a.vram_limited = pick(2) == 0;
    s.active.push_back(std::move(a));
  }
  size_t queued = pick(12);
  for (size_t i = 0; i < queued; ++i) {
    WaitingJob w;
    w.job_id = "j" + std::to_string(i);
    w.peer_id = peers[pick(4)];
    w.gpus = pick(3) == 0 ? 1 + static_cast<int>(pick(3)) : 0;
    w.vram_bytes = pick(3) == 0 ? (pick(2) ? 20 * kGiB : 40 * kGiB) : 0;
    w.disk_bytes = pick(8) * kGiB;
    w.peer_limit = static_cast<int>(pick(4));
    w.held = pick(8) == 0;
    for (size_t d = pick(4) == 0 ? 1 + pick(2) : 0; d > 0; --d) {
      Dependency dep;
      dep.job_id = "d" + std::to_string(pick(5));
      dep.ok_only = pick(2) == 0;
      dep.state = static_cast<Dependency::State>(pick(4));
      dep.how = "exited with 1";
      w.after.push_back(dep);
    }
    s.queue.push_back(std::move(w));
  }
  if (pick(2) == 0) {
    DiskSnapshot d;
    d.free_bytes = pick(40) * kGiB;
    d.reserve_bytes = pick(3) * kGiB;
    d.allocated_by_live = pick(10) * kGiB;
    d.promised_unallocated = pick(6) * kGiB;
    d.allocated_by_ended = pick(10) * kGiB;
    s.disk = d;
  }
  if (pick(3) == 0) {
    std::vector<std::string> pref;
    for (size_t i = pick(queued + 3); i > 0; --i) pref.push_back("j" + std::to_string(pick(queued + 2)));
    s.preferred_order = pref;
  }
  if (pick(2) == 0) s.vram_sample_at = kNow + std::chrono::seconds(static_cast<int64_t>(pick(6)) - 2);
  if (pick(2) == 0) s.sweep_at = kNow + std::chrono::seconds(static_cast<int64_t>(pick(6)) - 2);
  s.sweep_requested = pick(4) == 0;
  return s;
}

const WaitingJob& queued(const QueueSnapshot& s, const std::string& id) {
  return *std::find_if(s.queue.begin(), s.queue.end(), [&](const WaitingJob& w) { return w.job_id == id; });
}

// The queued job an action decides, if it decides one.
std::optional<std::string> job_of(const QueueAction& a) {
  if (const auto* st = std::get_if<StartJob>(&a)) return st->job_id;
  if (const auto* w = std::get_if<WaitJob>(&a)) return w->job_id;
  if (const auto* r = std::get_if<RefuseJob>(&a)) return r->job_id;
  return std::nullopt;
}

// What the plan decided for one queued job, for comparing plans.
std::string decision_of(const QueuePlan& plan, const std::string& id) {
  for (const auto& a : plan.actions) {
    if (const auto* st = std::get_if<StartJob>(&a); st && st->job_id == id) {
      std::string out = "start";
      for (const auto& u : st->gpu_uuids) out += " " + u;
      return out;
    }
    if (const auto* w = std::get_if<WaitJob>(&a); w && w->job_id == id) return "wait " + w->reason;
    if (const auto* r = std::get_if<RefuseJob>(&a); r && r->job_id == id) return "refuse " + r->reason;
  }
  return "untouched";
}

// The snapshot after the caller applied `plan` (no time passes).
QueueSnapshot applied(const QueueSnapshot& s, const QueuePlan& plan) {
  QueueSnapshot next = s;
  next.queue.clear();
  for (const auto& id : plan.queue) next.queue.push_back(queued(s, id));
  for (const auto& a : plan.actions) {
    if (const auto* st = std::get_if<StartJob>(&a)) {
      const WaitingJob& w = queued(s, st->job_id);
      ActiveJob started;
      started.job_id = w.job_id;
      started.peer_id = w.peer_id;
      started.gpu_uuids = st->gpu_uuids;
      next.active.push_back(started);
      if (next.disk) next.disk->promised_unallocated += w.disk_bytes;
    } else if (const auto* stop = std::get_if<StopJob>(&a)) {
      for (auto& act : next.active) act.stopping = act.stopping || act.job_id == stop->job_id;
    }
  }
  next.sweep_requested = false;
  next.sweep_at.reset();
  next.vram_sample_at.reset();
  return next;
}

constexpr int kRuns = 3000;

TEST(QueueCoreProperty, NeverAssignsADeviceTwiceOrOneNotFreeOrTooSmall) {
  std::mt19937_64 rng(1);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    std::set<std::string> taken;
    for (const auto& a : s.active) taken.insert(a.gpu_uuids.begin(), a.gpu_uuids.end());
    for (const auto& st : all_of_kind<StartJob>(plan)) {
      const WaitingJob& w = queued(s, st.job_id);
      ASSERT_EQ(static_cast<int>(st.gpu_uuids.size()), w.gpus) << "run " << run;
      for (const auto& u : st.gpu_uuids) {
        ASSERT_TRUE(taken.insert(u).second) << "run " << run << ": " << u << " given twice";
        ASSERT_TRUE(s.gpus && s.gpus->usable) << "run " << run;
        auto dev = std::find_if(s.gpus->devices.begin(), s.gpus->devices.end(),
                                [&](const GpuSlot& d) { return d.uuid == u; });
        ASSERT_NE(dev, s.gpus->devices.end()) << "run " << run << ": " << u << " is not a device";
        ASSERT_GE(dev->memory_total_bytes, w.vram_bytes) << "run " << run;
      }
    }
  }
}

TEST(QueueCoreProperty, NeverStartsMoreThanTheSlotsThePeersOrTheDiskAllow) {
  std::mt19937_64 rng(2);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    auto starts = all_of_kind<StartJob>(plan);
    int active = static_cast<int>(s.active.size());
    if (!starts.empty()) {
      ASSERT_LE(active + static_cast<int>(starts.size()), s.max_concurrent) << "run " << run;
    }
    std::map<std::string, int> before, added;
    for (const auto& a : s.active) ++before[a.peer_id];
    uint64_t promised = 0;
    for (const auto& st : starts) {
      const WaitingJob& w = queued(s, st.job_id);
      ++added[w.peer_id];
      promised += w.disk_bytes;
    }
    for (const auto& [peer, n] : added) ASSERT_LE(before[peer] + n, s.max_per_peer) << "run " << run;
    // Each start, in the plan's order, stays within its own scope's limit.
    std::map<std::string, int> so_far = before;
    for (const auto& st : starts) {
      const WaitingJob& w = queued(s, st.job_id);
      if (w.peer_limit > 0) {
        ASSERT_LT(so_far[w.peer_id], w.peer_limit) << "run " << run << " job " << w.job_id;
      }
      ++so_far[w.peer_id];
    }
    if (s.disk && !starts.empty()) {
      const DiskSnapshot& d = *s.disk;
      uint64_t free_now = d.free_bytes > d.reserve_bytes ? d.free_bytes - d.reserve_bytes : 0;
      free_now = free_now > d.promised_unallocated ? free_now - d.promised_unallocated : 0;
      ASSERT_LE(promised, free_now) << "run " << run;
    }
  }
}

TEST(QueueCoreProperty, EveryJobIsStartedLeftQueuedOrRefusedWithAReasonNeverLost) {
  std::mt19937_64 rng(3);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    std::vector<std::string> ids;
    for (const auto& w : s.queue) ids.push_back(w.job_id);
    std::vector<std::string> order = plan.order;
    std::sort(ids.begin(), ids.end());
    std::sort(order.begin(), order.end());
    ASSERT_EQ(order, ids) << "run " << run << ": the order is a permutation of the queue";
    std::map<std::string, int> outcomes;
    std::set<std::string> decided;
    for (const auto& a : plan.actions) {
      if (const auto* st = std::get_if<StartJob>(&a)) ++outcomes[st->job_id];
      if (const auto* r = std::get_if<RefuseJob>(&a)) {
        ++outcomes[r->job_id];
        ASSERT_FALSE(r->reason.empty()) << "run " << run;
      }
      if (const auto* w = std::get_if<WaitJob>(&a)) {
        ASSERT_FALSE(w->reason.empty()) << "run " << run;
      }
      if (auto id = job_of(a)) {
        ASSERT_TRUE(decided.insert(*id).second) << "run " << run << ": " << *id << " decided twice";
      }
    }
    for (const auto& id : plan.queue) ++outcomes[id];
    for (const auto& id : ids) ASSERT_EQ(outcomes[id], 1) << "run " << run << ": " << id;
    ASSERT_EQ(outcomes.size(), ids.size()) << "run " << run << ": a decision about a job not queued";
    // Left queued in the pass's order.
    auto pos = plan.order.begin();
    for (const auto& id : plan.queue) {
      pos = std::find(pos, plan.order.end(), id);
      ASSERT_NE(pos, plan.order.end()) << "run " << run << ": the queue left is out of order";
    }
  }
}

TEST(QueueCoreProperty, DeterministicWhateverTheOrderOfTheActiveJobsAndThePolicysNoise) {
  std::mt19937_64 rng(4);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    ASSERT_EQ(plan_queue(s), plan) << "run " << run;
    QueueSnapshot shuffled = s;
    std::shuffle(shuffled.active.begin(), shuffled.active.end(), rng);
    if (shuffled.preferred_order) {
      // Unknown ids and repeats of ids already named change nothing.
      shuffled.preferred_order->push_back("nobody");
      if (!shuffled.preferred_order->empty()) shuffled.preferred_order->push_back(shuffled.preferred_order->front());
    }
    ASSERT_EQ(plan_queue(shuffled), plan) << "run " << run;
  }
}

TEST(QueueCoreProperty, TheNextDeadlineIsTheEarliestPendingOne) {
  std::mt19937_64 rng(5);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    // The reference, by brute force.
    std::optional<MonoTime> expect;
    auto consider = [&](MonoTime t) {
      if (!expect || t < *expect) expect = t;
    };
    bool watched = false;
    std::set<std::string> stopped;
    for (const auto& a : s.active) {
      if (!a.running || a.stopping) continue;
      if (a.deadline && *a.deadline <= s.now) {
        stopped.insert(a.job_id);
        continue;
      }
      if (a.deadline) consider(*a.deadline);
      watched = watched || (a.vram_limited && !a.gpu_uuids.empty());
    }
    bool sweep = s.sweep_requested || (s.sweep_at && *s.sweep_at <= s.now);
    if (!sweep && s.sweep_at) consider(*s.sweep_at);
    bool sample = watched && s.vram_sample_at && *s.vram_sample_at <= s.now;
    if (watched && s.vram_sample_at && !sample) consider(*s.vram_sample_at);
    ASSERT_EQ(plan.next_deadline, expect) << "run " << run;
    if (plan.next_deadline) {
      ASSERT_GT(*plan.next_deadline, s.now) << "run " << run << ": a due deadline left pending";
    }
    std::set<std::string> stops;
    for (const auto& st : all_of_kind<StopJob>(plan)) stops.insert(st.job_id);
    ASSERT_EQ(stops, stopped) << "run " << run;
    ASSERT_EQ(all_of_kind<SweepDisk>(plan).size(), sweep ? 1u : 0u) << "run " << run;
    ASSERT_EQ(all_of_kind<SampleVram>(plan).size(), sample ? 1u : 0u) << "run " << run;
  }
}

// A pass leaves nothing undone: applied, the next pass starts, refuses and
// stops nothing.
TEST(QueueCoreProperty, APassIsComplete) {
  std::mt19937_64 rng(6);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    QueueSnapshot next = applied(s, plan);
    QueuePlan again = plan_queue(next);
    ASSERT_TRUE(all_of_kind<StartJob>(again).empty()) << "run " << run;
    ASSERT_TRUE(all_of_kind<RefuseJob>(again).empty()) << "run " << run;
    ASSERT_TRUE(all_of_kind<StopJob>(again).empty()) << "run " << run;
    ASSERT_EQ(again.order, plan.queue) << "run " << run << ": the policy's order is kept";
    // A job that waits now waited before (perhaps for another reason: a job
    // of its peer behind it may have taken the peer's last slot).
    std::set<std::string> waited;
    for (const auto& w : all_of_kind<WaitJob>(plan)) waited.insert(w.job_id);
    for (const auto& w : all_of_kind<WaitJob>(again)) ASSERT_TRUE(waited.count(w.job_id)) << "run " << run;
  }
}

// A held job, or one with an unmet dependency, never starts whatever is
// free; one whose --after-ok job failed or is gone is refused as
// dependency_failed, and only such a job is.
TEST(QueueCoreProperty, HoldsAndDependenciesAreNeverStartedThrough) {
  std::mt19937_64 rng(9);
  using State = Dependency::State;
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    for (const auto& id : started_ids(plan)) {
      const WaitingJob& w = queued(s, id);
      ASSERT_FALSE(w.held) << "run " << run;
      for (const auto& d : w.after) {
        ASSERT_TRUE(d.state == State::kSucceeded || (!d.ok_only && d.state != State::kPending)) << "run " << run;
      }
    }
    for (const auto& r : all_of_kind<RefuseJob>(plan)) {
      const WaitingJob& w = queued(s, r.job_id);
      bool dead = !w.held && std::any_of(w.after.begin(), w.after.end(), [](const Dependency& d) {
        return d.ok_only && (d.state == State::kFailed || d.state == State::kGone);
      });
      ASSERT_EQ(r.code == "dependency_failed", dead) << "run " << run << ": " << r.reason;
    }
  }
}

// No job is decided by the jobs behind it: each job's outcome is the same
// with only the jobs before it in the queue. For the head: if it can start
// against what is free, it starts, whatever waits behind it.
TEST(QueueCoreProperty, NoJobIsPassedOverForAJobBehindIt) {
  std::mt19937_64 rng(7);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    QueuePlan plan = plan_queue(s);
    for (size_t i = 0; i < plan.order.size(); ++i) {
      QueueSnapshot prefix = s;
      prefix.preferred_order.reset();
      prefix.queue.clear();
      for (size_t k = 0; k <= i; ++k) prefix.queue.push_back(queued(s, plan.order[k]));
      ASSERT_EQ(decision_of(plan_queue(prefix), plan.order[i]), decision_of(plan, plan.order[i]))
          << "run " << run << ", position " << i;
    }
  }
}

// Refusal is for good and never for what other jobs hold: a refused job is
// refused alone on an idle provider too.
TEST(QueueCoreProperty, ARefusalDoesNotDependOnOtherJobs) {
  std::mt19937_64 rng(8);
  for (int run = 0; run < kRuns; ++run) {
    QueueSnapshot s = random_snapshot(rng);
    for (const auto& r : all_of_kind<RefuseJob>(plan_queue(s))) {
      QueueSnapshot idle = s;
      idle.active.clear();
      idle.max_concurrent = 1;
      idle.preferred_order.reset();
      idle.queue = {queued(s, r.job_id)};
      if (idle.disk) idle.disk->promised_unallocated = 0;
      ASSERT_EQ(decision_of(plan_queue(idle), r.job_id), "refuse " + r.reason) << "run " << run;
    }
  }
}

// ---- Purity: the core and what it includes stay free of I/O ----

TEST(QueueCorePurity, NoThreadsLocksClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>", "<mutex>",    "<condition_variable>", "<future>",
                                           "<atomic>", "asio",       "sqlite",               "base/clock.h",
                                           "gpu/",     "<fstream>",  "<filesystem>",         "<sys/",
                                           "<unistd.h>", "os/",      "store/",               "exec/"};
  std::set<std::string> files =
      testing::check_core_purity({"jobs/provider/queue_core.h", "jobs/provider/queue_core.cpp",
                                  "jobs/provider/gpu_shares.cpp"},
                                 banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_GE(files.size(), 6u) << "the core, its header, disk_budget.h, gpu_leases.h and gpu_shares.{h,cpp}";
}

}  // namespace
}  // namespace yonder::jobs::provider
