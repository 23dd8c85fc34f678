// Array jobs, the pure core: a seeded, deterministic simulation
// of 10,000 tasks over 50 providers of mixed speed, some flaky, one very
// slow, one leaving mid-run; plus the range parser and persistence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>
#include <set>
#include <random>
#include <string>

#include "mesh/core/work_units.h"

namespace yonder::mesh {
namespace {

PeerKey key(uint32_t n) {
  PeerKey k{};
  for (size_t i = 0; i < 4; ++i) k[31 - i] = static_cast<uint8_t>(n >> (8 * i));
  return k;
}

struct SimProvider {
  PeerKey id{};
  double speed = 1.0;      // work units per ms
  double fail_rate = 0.0;  // chance an attempt fails
  uint32_t slots = 1;
  uint32_t busy = 0;
  bool alive = true;
};

struct SimOptions {
  uint32_t tasks = 10'000;
  uint32_t providers = 50;
  uint32_t limit = 64;
  uint32_t retries = 2;
  uint32_t max_speculative = 2;
  uint64_t seed = 1;
  bool provider_leaves = true;
};

struct SimResult {
  uint32_t done = 0, failed = 0;
  uint64_t results = 0, discarded = 0, lost = 0, retried = 0, speculative_launches = 0;
  uint32_t max_running = 0;
  UnixMs makespan = 0;
  std::map<uint32_t, uint32_t> results_per_task;
  uint64_t trace = 1469598103934665603ull;  // FNV-1a over the events
  bool over_limit = false, over_slots = false, stalled = false;
};

SimResult simulate(const SimOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<SimProvider> ps(o.providers);
  for (uint32_t i = 0; i < o.providers; ++i) {
    ps[i].id = key(i + 1);
    ps[i].speed = 0.3 + 1.7 * unit(rng);
    ps[i].slots = 1 + static_cast<uint32_t>(unit(rng) * 2);
    ps[i].fail_rate = 0.01;
  }
  ps[3].speed = 0.01;     // very slow: its tasks would stall the end
  ps[7].fail_rate = 0.4;  // flaky
  ArraySpec spec;
  spec.tasks = o.tasks;
  spec.limit = o.limit;
  spec.retries = o.retries;
  spec.max_speculative = o.max_speculative;
  spec.min_straggler_ms = 2'000;
  ArrayRun run(spec);
  std::vector<double> work(o.tasks);
  for (auto& w : work) w = 500 + 1000 * unit(rng);  // 0.5-1.5 s at speed 1

  struct Event {
    UnixMs at;
    uint64_t seq;
    uint64_t attempt;  // 0: the provider leaves
    bool stop = false;  // the driver's stop of a redundant attempt lands
    bool operator>(const Event& e) const { return std::tie(at, seq) > std::tie(e.at, e.seq); }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  uint64_t seq = 0;
  std::map<uint64_t, size_t> where;  // attempt -> provider index
  std::set<uint64_t> stopping;
  const UnixMs kStopDelayMs = 3'000;
  SimResult res;
  auto mix = [&](uint64_t v) {
    res.trace ^= v;
    res.trace *= 1099511628211ull;
  };
  UnixMs now = 0;
  bool left = false;
  const UnixMs kGiveUp = 100'000'000;  // 28 simulated hours: far beyond any sane end

  auto free_slot = [&](size_t p) {
    if (ps[p].busy > 0) --ps[p].busy;
  };
  auto launch = [&] {
    size_t capacity = 0;
    for (const auto& p : ps) capacity += p.alive ? p.slots - p.busy : 0;
    for (const auto& l : run.next(now, capacity)) {
      // Placement: any alive provider with a free slot that the launch
      // does not avoid (the scheduler does not know how fast each is).
      std::vector<size_t> fit;
      for (size_t i = 0; i < ps.size(); ++i) {
        if (ps[i].alive && ps[i].busy < ps[i].slots && !l.avoid.count(ps[i].id)) fit.push_back(i);
      }
      std::optional<size_t> best;
      if (!fit.empty()) best = fit[static_cast<size_t>(unit(rng) * static_cast<double>(fit.size())) % fit.size()];
      if (!best) {
        run.unplaced(l.attempt);
        continue;
      }
      if (l.speculative) ++res.speculative_launches;
      ++ps[*best].busy;
      if (ps[*best].busy > ps[*best].slots) res.over_slots = true;
      EXPECT_TRUE(run.started(l.attempt, ps[*best].id, now).ok());
      where[l.attempt] = *best;
      events.push({now + static_cast<UnixMs>(work[l.task] / ps[*best].speed), seq++, l.attempt});
      mix(l.attempt * 131 + *best);
    }
    uint32_t running = run.counts().attempts_running;
    res.max_running = std::max(res.max_running, running);
    if (running > o.limit) res.over_limit = true;
  };

  launch();
  while (!run.complete()) {
    if (!left && o.provider_leaves && run.counts().done >= o.tasks / 2) {
      events.push({now, seq++, 0});
      left = true;
    }
    if (events.empty()) {
      res.stalled = true;  // nothing runs, nothing can be placed: stuck
      break;
    }
    Event e = events.top();
    events.pop();
    now = e.at;
    if (now > kGiveUp) {
      res.stalled = true;
      break;
    }
    if (e.attempt == 0) {  // a busy provider (not the slow one) leaves without a word
      size_t gone = 0;
      while (gone + 1 < ps.size() && (ps[gone].busy == 0 || gone == 3)) ++gone;
      ps[gone].alive = false;
      for (auto [attempt, verdict] : run.provider_lost(ps[gone].id, now)) {
        where.erase(attempt);
        mix(attempt * 7 + static_cast<uint64_t>(verdict));
      }
      ps[gone].busy = 0;
      launch();
      continue;
    }
    auto w = where.find(e.attempt);
    if (w == where.end()) continue;  // lost, stopped or finished earlier
    size_t p = w->second;
    where.erase(w);
    free_slot(p);
    if (e.stop) {
      run.finished(e.attempt, AttemptOutcome::kStopped, now);
      launch();
      continue;
    }
    bool fails = unit(rng) < ps[p].fail_rate;
    uint32_t task = run.task_of(e.attempt).value_or(UINT32_MAX);
    auto verdict = run.finished(e.attempt, fails ? AttemptOutcome::kFailed : AttemptOutcome::kSucceeded, now,
                                "digest-" + std::to_string(e.attempt));
    mix(e.attempt * 31 + static_cast<uint64_t>(verdict));
    if (verdict == ArrayRun::Verdict::kResult) {
      ++res.results;
      ++res.results_per_task[task];
    }
    // The task has its result: its other attempts are stopped, which
    // takes a moment; one that finishes meanwhile has its result discarded.
    for (uint64_t extra : run.redundant_attempts()) {
      if (stopping.insert(extra).second) events.push({now + kStopDelayMs, seq++, extra, true});
    }
    launch();
  }
  res.makespan = now;
  ArrayCounts c = run.counts();
  res.done = c.done;
  res.failed = c.failed;
  res.discarded = c.discarded;
  res.lost = c.lost;
  res.retried = c.retried;
  return res;
}

TEST(WorkUnits, TenThousandTasksOverFiftyProvidersEachGetOneResult) {
  SimOptions o;
  SimResult r = simulate(o);
  std::printf("done %u failed %u results %llu discarded %llu lost %llu retried %llu speculative %llu max running %u "
              "makespan %.1f s\n",
              r.done, r.failed, static_cast<unsigned long long>(r.results),
              static_cast<unsigned long long>(r.discarded), static_cast<unsigned long long>(r.lost),
              static_cast<unsigned long long>(r.retried), static_cast<unsigned long long>(r.speculative_launches),
              r.max_running, static_cast<double>(r.makespan) / 1000);
  EXPECT_FALSE(r.stalled);
  EXPECT_FALSE(r.over_limit);
  EXPECT_FALSE(r.over_slots);
  EXPECT_LE(r.max_running, o.limit);
  EXPECT_EQ(r.done + r.failed, o.tasks);
  EXPECT_EQ(r.results, r.done) << "every done task has exactly one result";
  EXPECT_EQ(r.results_per_task.size(), r.done);
  for (const auto& [task, n] : r.results_per_task) ASSERT_EQ(n, 1u) << "task " << task;
  EXPECT_GT(r.lost, 0u) << "the leaving provider had tasks running";
  EXPECT_GT(r.retried, 0u) << "the flaky provider's failures were retried";
  EXPECT_GT(r.speculative_launches, 0u) << "the slow provider's last tasks were copied";
  EXPECT_GT(r.discarded, 0u) << "a copy that finished while being stopped has its result dropped";
}

TEST(WorkUnits, SpeculationKeepsTheSlowProviderFromStallingTheEnd) {
  SimOptions with, without;
  with.tasks = without.tasks = 600;
  without.max_speculative = 0;
  SimResult a = simulate(with), b = simulate(without);
  std::printf("makespan with speculation %.1f s, without %.1f s\n", static_cast<double>(a.makespan) / 1000,
              static_cast<double>(b.makespan) / 1000);
  EXPECT_FALSE(a.stalled);
  EXPECT_FALSE(b.stalled);
  EXPECT_LT(a.makespan, b.makespan);
  // A task on the slow provider takes 50-150 s; everyone else finishes the
  // whole array in well under a minute.
  EXPECT_LT(a.makespan, 60'000);
}

TEST(WorkUnits, SameSeedSameTrace) {
  SimOptions o;
  o.tasks = 2000;
  SimResult a = simulate(o), b = simulate(o);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.makespan, b.makespan);
  o.seed = 2;
  EXPECT_NE(simulate(o).trace, a.trace);
}

TEST(WorkUnits, TheLimitHoldsEvenWithMoreCapacity) {
  ArraySpec spec;
  spec.tasks = 10;
  spec.limit = 3;
  ArrayRun run(spec);
  auto first = run.next(0, 100);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_TRUE(run.next(0, 100).empty());
  for (const auto& l : first) ASSERT_TRUE(run.started(l.attempt, key(1), 0).ok());
  EXPECT_EQ(run.finished(first[0].attempt, AttemptOutcome::kSucceeded, 10, "a"), ArrayRun::Verdict::kResult);
  auto more = run.next(10, 100);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].task, 3u);
}

TEST(WorkUnits, AFailedTaskIsRetriedElsewhereThenFailsForGood) {
  ArraySpec spec;
  spec.tasks = 1;
  spec.retries = 1;
  ArrayRun run(spec);
  auto a = run.next(0, 1);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE(run.started(a[0].attempt, key(1), 0).ok());
  EXPECT_EQ(run.finished(a[0].attempt, AttemptOutcome::kFailed, 5), ArrayRun::Verdict::kRetry);
  auto b = run.next(5, 1);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].avoid.count(key(1)), 1u) << "not on the provider it failed on";
  ASSERT_TRUE(run.started(b[0].attempt, key(2), 5).ok());
  EXPECT_EQ(run.finished(b[0].attempt, AttemptOutcome::kFailed, 9), ArrayRun::Verdict::kFailed);
  EXPECT_TRUE(run.complete());
  EXPECT_EQ(run.counts().failed, 1u);
  EXPECT_EQ(run.retry_failed(), 1u);
  EXPECT_FALSE(run.complete());
  EXPECT_EQ(run.next(10, 1).size(), 1u);
}

// A task whose provider went while nobody else would take its job comes
// back unplaced after it started. It once kept that attempt: nobody watched
// it, so the array counted it running for ever and never ended (found by
// mesh_array_test under CI's load).
TEST(WorkUnits, AnAttemptUnplacedAfterItStartedGoesAndItsTaskRunsAgain) {
  ArraySpec spec;
  spec.tasks = 1;
  ArrayRun run(spec);
  auto a = run.next(0, 1);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE(run.started(a[0].attempt, key(1), 0).ok());
  run.unplaced(a[0].attempt);
  EXPECT_EQ(run.counts().attempts_running, 0u);
  EXPECT_EQ(run.counts().pending, 1u);
  EXPECT_EQ(run.counts().retried, 0u) << "not the task's fault: no retry spent";
  auto b = run.next(10, 1);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].task, 0u);
  ASSERT_TRUE(run.started(b[0].attempt, key(2), 10).ok());
  EXPECT_EQ(run.finished(b[0].attempt, AttemptOutcome::kSucceeded, 20, "x"), ArrayRun::Verdict::kResult);
  EXPECT_TRUE(run.complete());
}

TEST(WorkUnits, ALostProviderRequeuesItsTasksAndADuplicateResultIsDiscarded) {
  ArraySpec spec;
  spec.tasks = 2;
  spec.min_straggler_ms = 0;
  spec.straggler_factor = 2;
  ArrayRun run(spec);
  auto l = run.next(0, 2);
  ASSERT_EQ(l.size(), 2u);
  ASSERT_TRUE(run.started(l[0].attempt, key(1), 0).ok());
  ASSERT_TRUE(run.started(l[1].attempt, key(2), 0).ok());
  auto lost = run.provider_lost(key(2), 50);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, ArrayRun::Verdict::kRetry);
  auto again = run.next(50, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task, 1u);
  ASSERT_TRUE(run.started(again[0].attempt, key(3), 50).ok());
  EXPECT_EQ(run.finished(again[0].attempt, AttemptOutcome::kSucceeded, 100, "x"), ArrayRun::Verdict::kResult);
  // Task 0 has run 300 ms against a median of 50 ms: a straggler, copied.
  auto spec_copy = run.next(300, 1);
  ASSERT_EQ(spec_copy.size(), 1u);
  EXPECT_TRUE(spec_copy[0].speculative);
  EXPECT_EQ(spec_copy[0].task, 0u);
  EXPECT_EQ(spec_copy[0].avoid.count(key(1)), 1u);
  ASSERT_TRUE(run.started(spec_copy[0].attempt, key(3), 300).ok());
  EXPECT_EQ(run.finished(spec_copy[0].attempt, AttemptOutcome::kSucceeded, 320, "y"), ArrayRun::Verdict::kResult);
  EXPECT_EQ(run.redundant_attempts(), std::vector<uint64_t>{l[0].attempt});
  EXPECT_EQ(run.finished(l[0].attempt, AttemptOutcome::kSucceeded, 330, "z"), ArrayRun::Verdict::kDiscarded);
  EXPECT_EQ(run.result(0), "y");
  EXPECT_TRUE(run.complete());
  // Its outputs could not be collected: it runs again, elsewhere.
  ASSERT_TRUE(run.reopen(0).ok());
  EXPECT_FALSE(run.reopen(0).ok());
  auto rerun = run.next(400, 5);
  ASSERT_EQ(rerun.size(), 1u);
  EXPECT_EQ(rerun[0].task, 0u);
  EXPECT_EQ(rerun[0].avoid.count(key(3)), 1u);
}

TEST(WorkUnits, StateSurvivesARestartWithoutRerunningFinishedTasks) {
  ArraySpec spec;
  spec.tasks = 5;
  spec.retries = 2;
  ArrayRun run(spec);
  auto l = run.next(0, 3);
  for (const auto& x : l) ASSERT_TRUE(run.started(x.attempt, key(9), 0).ok());
  ASSERT_EQ(run.finished(l[0].attempt, AttemptOutcome::kSucceeded, 10, "d0"), ArrayRun::Verdict::kResult);
  ASSERT_EQ(run.finished(l[1].attempt, AttemptOutcome::kFailed, 10), ArrayRun::Verdict::kRetry);
  auto restored = ArrayRun::from_json(nlohmann::json::parse(run.to_json().dump()));
  ASSERT_TRUE(restored.ok()) << restored.error().to_string();
  EXPECT_EQ(restored->state(0), TaskState::kDone);
  EXPECT_EQ(restored->result(0), "d0");
  EXPECT_EQ(restored->counts().retried, 1u) << "the counters survive too";
  std::vector<uint32_t> started;
  for (const auto& x : restored->next(20, 10)) started.push_back(x.task);
  EXPECT_EQ(started, (std::vector<uint32_t>{1, 2, 3, 4})) << "everything but the finished task runs again";
  EXPECT_FALSE(ArrayRun::from_json(nlohmann::json{{"v", 1}, {"tasks", "x"}}).ok());
  EXPECT_FALSE(ArrayRun::from_json(nlohmann::json{{"v", 1}, {"tasks", 2}, {"state", {{{"s", "odd"}}, {{"s", "done"}}}}}).ok());
}

TEST(WorkUnits, ArrayRangesParseAsSlurmWritesThem) {
  ArraySpec s;
  ASSERT_TRUE(parse_array_range("0-4999%8", s).ok());
  EXPECT_EQ(s.tasks, 5000u);
  EXPECT_EQ(s.limit, 8u);
  ASSERT_TRUE(parse_array_range("0-9", s).ok());
  EXPECT_EQ(s.tasks, 10u);
  EXPECT_EQ(s.limit, 0u);
  for (const char* bad : {"", "5", "1-4", "0-", "-3", "0-x", "0-9%0", "0-9%", "0-99999999", "0-3%-1"}) {
    auto st = parse_array_range(bad, s);
    EXPECT_FALSE(st.ok()) << bad;
    if (!st.ok()) {
      EXPECT_NE(st.error().message().find("0-N"), std::string::npos) << st.error().message();
    }
  }
}

}  // namespace
}  // namespace yonder::mesh
