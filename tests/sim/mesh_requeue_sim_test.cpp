// Mesh jobs over the in-memory network (sim_supervisor.h): the supervisor
// core's decisions carried out over real link services between a consumer
// and several providers, in the simulation's time. A provider cut off
// mid-job leads to exactly one requeue on another provider, no sooner than
// its silence passes mesh.provider_timeout, and the job finishes once; an
// array of tasks over providers that fail or vanish finishes every task
// exactly once within its retries and requeues. Each is checked for
// several seeds, which choose the read splits, the providers' order, which
// providers fail and when the partitions come.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/sim_peers.h"
#include "sim/sim_supervisor.h"

namespace yonder::sim {
namespace {

using namespace std::chrono_literals;
using supervisor::AttemptState;

constexpr uint64_t kSeeds[] = {1, 2, 3, 17, 4242, 90001};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

struct Mesh {
  // `fail_rates[i]`: the chance that a job on provider i exits 1 (0 past the list).
  Mesh(uint64_t seed, int provider_count, std::vector<double> fail_rates = {}) : net(seed), rng(seed) {
    consumer = &net.add_node("consumer");
    for (int i = 0; i < provider_count; ++i) {
      SimNode& p = net.add_node("provider" + std::to_string(i));
      Scope run_only;  // the default scope: run
      if (!net.pair(*consumer, p, run_only).ok()) std::abort();
      double fail_rate = static_cast<size_t>(i) < fail_rates.size() ? fail_rates[static_cast<size_t>(i)] : 0;
      servers.push_back(std::make_unique<SimRunProvider>(p, clock, rng(), fail_rate));
      providers.push_back(&p);
    }
    std::shuffle(providers.begin(), providers.end(), rng);  // the order leases would offer them
  }
  ~Mesh() { net.stop(); }

  // Time passes in steps of `period`: each step every supervisor ticks and
  // the network delivers what it carries.
  void advance(std::chrono::milliseconds total, std::chrono::milliseconds period,
               const std::vector<SimSupervisor*>& jobs) {
    for (auto t = 0ms; t < total; t += period) {
      clock.now += period;
      for (auto* j : jobs) j->tick();
      net.settle();
    }
  }

  SimNet net;
  std::mt19937_64 rng;
  SimClock clock;
  SimNode* consumer = nullptr;
  std::vector<SimNode*> providers;
  std::vector<std::unique_ptr<SimRunProvider>> servers;
};

TEST(MeshRequeueSim, AProviderCutOffMidJobIsRequeuedOnceElsewhereAfterTheTimeout) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Mesh m(seed, 3);
    supervisor::Settings settings;
    settings.provider_timeout = 10s;
    settings.max_requeues = 3;
    const auto period = settings.provider_timeout / 4;
    SimSupervisor job(*m.consumer, m.providers, m.clock, settings, {{"run_ms", 30'000}, {"exit_code", 0}}, 0);
    job.start();
    m.net.settle();
    ASSERT_EQ(job.state().attempts.size(), 1u) << joined(job.trace);
    ASSERT_EQ(job.attempt(0).state, AttemptState::kRunning) << joined(job.trace);
    SimNode* first = m.providers[0];
    EXPECT_EQ(job.attempt(0).provider_id, first->id());

    m.advance(5s, period, {&job});  // answered all along
    ASSERT_EQ(job.state().attempts.size(), 1u) << joined(job.trace);
    auto cut_at = m.clock.now;
    m.net.cut(*m.consumer, *first);
    m.advance(settings.provider_timeout - period, period, {&job});
    EXPECT_EQ(job.state().attempts.size(), 1u) << "lost before the timeout:" << joined(job.trace);

    m.advance(2 * period, period, {&job});
    ASSERT_EQ(job.state().attempts.size(), 2u) << joined(job.trace);
    EXPECT_EQ(job.attempt(0).state, AttemptState::kLost);
    ASSERT_EQ(job.lost_at.count(0), 1u);
    // Its last answer came at the tick of the cut; lost at the first tick
    // past that answer + the timeout (strictly: the tick at exactly the
    // timeout still waits).
    EXPECT_TRUE(job.lost_at[0] == cut_at + settings.provider_timeout + period)
        << "lost " << (job.lost_at[0] - cut_at).count() << " ns after the cut";
    EXPECT_NE(job.attempt(1).provider_id, first->id()) << "the requeue goes elsewhere";
    EXPECT_EQ(job.attempt(1).state, AttemptState::kRunning) << joined(job.trace);

    m.advance(40s, period, {&job});
    ASSERT_EQ(job.finished.size(), 1u) << joined(job.trace);
    EXPECT_EQ(job.finished[0].state, "succeeded");
    EXPECT_EQ(job.finished[0].attempt, 1);
    EXPECT_EQ(job.state().attempts.size(), 2u) << "exactly one requeue:" << joined(job.trace);
    int started = 0;
    for (const auto& s : m.servers) started += s->submitted;
    EXPECT_EQ(started, 2) << "the job ran on two providers, once each";
  }
}

// Mesh arrays run each task as a mesh job: here 12 tasks over 5 providers,
// two of which fail a job at a seeded rate, while providers are cut off at
// seeded times (and come back later); a quarter of the tasks fail wherever
// they run. What each task's supervisor did and how it ended.
struct TaskOutcome {
  std::vector<std::string> trace;
  supervisor::JobState state;
  std::vector<supervisor::FinishJob> finished;
  bool operator==(const TaskOutcome&) const = default;
};
constexpr uint64_t kArrayRetries = 2;
constexpr uint32_t kArrayMaxRequeues = 2;

std::vector<TaskOutcome> run_array(uint64_t seed) {
  std::vector<std::unique_ptr<SimSupervisor>> tasks;  // outlive the network's last handlers
  Mesh m(seed, 5, {0.3, 0.3});
  supervisor::Settings settings;
  settings.provider_timeout = 8s;
  settings.max_requeues = kArrayMaxRequeues;
  const auto period = 2s;
  std::vector<SimSupervisor*> all;
  for (int i = 0; i < 12; ++i) {
    // Each task sees the providers in its own order, as leases spread them.
    auto order = m.providers;
    std::shuffle(order.begin(), order.end(), m.rng);
    int exit_code = std::bernoulli_distribution(0.25)(m.rng) ? 3 : 0;
    tasks.push_back(std::make_unique<SimSupervisor>(
        *m.consumer, order, m.clock, settings,
        nlohmann::json{{"run_ms", 4000 + 1000 * static_cast<int>(m.rng() % 8)}, {"exit_code", exit_code}},
        kArrayRetries));
    all.push_back(tasks.back().get());
  }
  for (auto* t : all) t->start();
  m.net.settle();

  // Providers vanish and come back at seeded times over a minute.
  std::vector<bool> away(m.providers.size(), false);
  for (int step = 0; step < 30; ++step) {
    size_t p = m.rng() % m.providers.size();
    if (m.rng() % 3 == 0) {
      if (away[p]) {
        auto back = m.net.connect(*m.consumer, *m.providers[p]);
        EXPECT_TRUE(back.ok()) << back.error().to_string();
      } else {
        m.net.cut(*m.consumer, *m.providers[p]);
      }
      away[p] = !away[p];
    }
    m.advance(period, period, all);
  }
  for (size_t p = 0; p < m.providers.size(); ++p) {
    if (away[p]) {
      EXPECT_TRUE(m.net.connect(*m.consumer, *m.providers[p]).ok());
    }
  }
  m.advance(120s, period, all);

  std::vector<TaskOutcome> out;
  for (const auto& t : tasks) out.push_back({t->trace, t->state(), t->finished});
  return out;
}

// Every task finishes exactly once; none ends more attempts than its
// retries allow or loses more than the requeues allow; a failed task used
// up one or the other.
TEST(MeshRequeueSim, AnArrayOverFlakyProvidersFinishesEveryTaskOnceWithinItsRetries) {
  int lost = 0, retried = 0, succeeded = 0, failed = 0;
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto tasks = run_array(seed);
    ASSERT_EQ(tasks.size(), 12u);
    for (size_t i = 0; i < tasks.size(); ++i) {
      const TaskOutcome& t = tasks[i];
      SCOPED_TRACE("task " + std::to_string(i) + joined(t.trace));
      ASSERT_EQ(t.finished.size(), 1u) << "finished once";
      EXPECT_TRUE(t.state.finished);
      uint64_t ended = 0, requeued = 0;
      for (const auto& a : t.state.attempts) {
        if (supervisor::job_ended(a.state)) ++ended;
        if (a.state == AttemptState::kLost || a.state == AttemptState::kNotStarted) ++requeued;
        if (a.state == AttemptState::kLost) ++lost;
        EXPECT_NE(a.state, AttemptState::kRunning) << "an attempt still running after the job finished";
      }
      if (ended > 1) ++retried;
      EXPECT_LE(ended, kArrayRetries + 1);
      EXPECT_LE(requeued, kArrayMaxRequeues + 1);
      const auto& fin = t.finished[0];
      if (fin.state == "succeeded") {
        ++succeeded;
        ASSERT_TRUE(fin.attempt.has_value());
        EXPECT_EQ(t.state.attempts[static_cast<size_t>(*fin.attempt)].exit_code, 0);
      } else {
        ++failed;
        EXPECT_EQ(fin.state, "failed");
        EXPECT_TRUE(ended == kArrayRetries + 1 || requeued == kArrayMaxRequeues + 1 || fin.unplaced)
            << "failed with retries and requeues left";
      }
    }
  }
  // The seeds reach every branch: losses, retries, both endings.
  EXPECT_GT(lost, 0);
  EXPECT_GT(retried, 0);
  EXPECT_GT(succeeded, 0);
  EXPECT_GT(failed, 0);
}

TEST(MeshRequeueSim, TheSameSeedGivesTheSameRun) {
  for (uint64_t seed : {5u, 77u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto first = run_array(seed);
    auto second = run_array(seed);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(first[i].trace, second[i].trace) << "task " << i;
      EXPECT_TRUE(first[i] == second[i]) << "task " << i;
    }
  }
}

}  // namespace
}  // namespace yonder::sim
