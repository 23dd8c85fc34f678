// The real mesh supervisor (mesh/jobs/mesh_jobs.h: its state, its SQLite
// store, its timers) over the in-memory network, in the simulation's time
// (tests/support/manual_loop_timers.h): a consumer and several providers
// whose job managers are stand-ins (sim_run_provider.h) reached with real
// calls over real link services. A provider cut off mid-job leads to
// exactly one requeue on another provider, no sooner than its silence
// passes mesh.provider_timeout, and the job finishes once; a restarted
// supervisor picks up the job it left running; many jobs over providers
// that fail or vanish (what an array runs) each finish exactly once within
// their retries and requeues, and so does an array (mesh/jobs/mesh_arrays.h,
// real too) whose tasks run as those jobs. Each is checked for several seeds, which
// choose the read splits, the providers' order, which providers fail and
// when the partitions come; the same seed gives the same run.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "api/server.h"
#include "mesh/jobs/mesh_array_store.h"
#include "mesh/jobs/mesh_arrays.h"
#include "mesh/jobs/mesh_job_store.h"
#include "mesh/jobs/mesh_jobs.h"
#include "sim/sim_attempts.h"
#include "sim/sim_peers.h"
#include "sim/sim_run_provider.h"
#include "support/manual_loop_timers.h"

namespace yonder::sim {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSeeds[] = {1, 2, 3, 17, 4242, 90001};
constexpr auto kStep = 100ms;  // how finely the simulation's time moves

std::string describe(const mesh::MeshJobRow& row) {
  std::string out = "job " + row.id.substr(0, 8) + " " + row.state;
  for (const auto& a : row.attempts) {
    out += "\n  attempt " + std::to_string(a.attempt) + " on " + a.provider_name + ": " + a.state +
           (a.exit_code ? " " + std::to_string(*a.exit_code) : "") + (a.why.empty() ? "" : " (" + a.why + ")");
  }
  return out;
}

struct Mesh {
  // `fail_rates[i]`: the chance that a job on provider i exits 1 (0 past the list).
  Mesh(uint64_t seed, int provider_count, std::vector<double> fail_rates = {}) : net(seed, &clock), rng(seed) {
    consumer = &net.add_node("consumer");
    for (int i = 0; i < provider_count; ++i) {
      SimNode& p = net.add_node("provider" + std::to_string(i));
      Scope run_only;  // the default scope: run
      if (!net.pair(*consumer, p, run_only).ok()) std::abort();
      double fail_rate = static_cast<size_t>(i) < fail_rates.size() ? fail_rates[static_cast<size_t>(i)] : 0;
      servers.push_back(std::make_unique<SimRunProvider>(p, clock, rng(), fail_rate));
      providers.push_back(&p);
    }
    std::shuffle(providers.begin(), providers.end(), rng);  // the order leases offer them
    attempts = std::make_unique<SimAttempts>(net, *consumer, providers);
  }
  ~Mesh() {
    arrays.reset();
    runner.reset();
    jobs.reset();
    net.stop();
  }

  // The consumer's supervisor (again, after a restart), on the node's own database.
  void start_supervisor(mesh::MeshJobSettings settings) {
    auto store = mesh::MeshJobStore::open(consumer->db);
    if (!store) std::abort();
    jobs = std::make_unique<mesh::MeshJobs>(net.io, net.io.get_executor(), clock, *consumer->peers, *attempts,
                                            std::move(*store), consumer->dir + "/mesh-jobs", settings);
    if (!jobs->start()) std::abort();
    net.settle();
  }
  // Arrays over that supervisor, as the daemon composes them; the local API's routes.
  void start_arrays() {
    auto store = mesh::MeshArrayStore::open(consumer->db);
    if (!store) std::abort();
    runner = std::make_unique<mesh::MeshJobsRunner>(*jobs);
    arrays = std::make_unique<mesh::MeshArrays>(net.io, net.io.get_executor(), clock, *runner, *attempts,
                                                std::move(*store));
    arrays->add_routes(routes);
    if (!arrays->start()) std::abort();
    net.settle();
  }
  nlohmann::json call(const std::string& method, const std::string& target, const nlohmann::json& body = {}) {
    api::Request req;
    req.method = method;
    auto q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    req.body = body.is_null() ? "" : body.dump();
    std::optional<api::Response> got;
    routes.dispatch(req, [&](api::Response r) { got = std::move(r); });
    net.run_until([&] { return got.has_value(); });
    if (!got) return {{"error", "no answer"}};
    nlohmann::json j = nlohmann::json::parse(got->body, nullptr, false);
    if (got->status != 200) return {{"error", got->body}, {"status", got->status}};
    return j;
  }

  std::string create(const jobs::protocol::JobRequest& job, uint64_t retries) {
    mesh::MeshJobSpec spec;
    spec.job = job;
    spec.retries = retries;
    std::optional<Result<nlohmann::json>> answer;
    jobs->create(spec, [&](Result<nlohmann::json> got) { answer = std::move(got); });
    net.run_until([&] { return answer.has_value(); });
    if (!answer || !*answer) std::abort();
    return (**answer).value("mesh_job_id", "");
  }
  // What the supervisor stored (a reader of its own, as `yonder mesh jobs` after a restart).
  mesh::MeshJobRow stored(const std::string& id) {
    net.settle();
    auto store = mesh::MeshJobStore::open(consumer->db);
    if (!store) std::abort();
    auto row = (*store)->find(id);
    if (!row) std::abort();
    return *row;
  }
  // Time passes in small steps; the network delivers what it carries after each.
  void advance(std::chrono::milliseconds total) {
    for (auto t = 0ms; t < total; t += kStep) {
      clock.advance(kStep);
      net.settle();
    }
  }

  testing::ManualLoopTimers clock;  // before the network, which counts by it
  SimNet net;
  std::mt19937_64 rng;
  SimNode* consumer = nullptr;
  std::vector<SimNode*> providers;
  std::vector<std::unique_ptr<SimRunProvider>> servers;
  std::unique_ptr<SimAttempts> attempts;
  std::unique_ptr<mesh::MeshJobs> jobs;
  std::unique_ptr<mesh::MeshJobsRunner> runner;
  std::unique_ptr<mesh::MeshArrays> arrays;
  api::Router routes;
};

int submitted(const Mesh& m) {
  int n = 0;
  for (const auto& s : m.servers) n += s->submitted;
  return n;
}

TEST(MeshJobsSim, AProviderCutOffMidJobIsRequeuedOnceElsewhereAfterTheTimeout) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Mesh m(seed, 3);
    mesh::MeshJobSettings settings;
    settings.provider_timeout = 10s;
    settings.max_requeues = 3;
    settings.checkpoint_interval = 3600s;
    m.start_supervisor(settings);
    std::string id = m.create(sim_job(30'000, 0), 0);
    m.net.settle();
    auto row = m.stored(id);
    ASSERT_EQ(row.attempts.size(), 1u) << describe(row);
    EXPECT_EQ(row.attempts[0].state, "running") << describe(row);
    SimNode* first = m.providers[0];
    EXPECT_EQ(row.attempts[0].provider_id, first->id());

    m.advance(5s);  // answered all along
    ASSERT_EQ(m.stored(id).attempts.size(), 1u) << describe(m.stored(id));
    m.net.cut(*m.consumer, *first);
    // Its last answer came at most one tick (a quarter of the timeout, at
    // most 500 ms) before the cut: not lost before the timeout less that.
    m.advance(settings.provider_timeout - 500ms);
    EXPECT_EQ(m.stored(id).attempts.size(), 1u) << "lost before the timeout: " << describe(m.stored(id));

    m.advance(1s);
    row = m.stored(id);
    ASSERT_EQ(row.attempts.size(), 2u) << describe(row);
    EXPECT_EQ(row.attempts[0].state, "lost") << describe(row);
    EXPECT_NE(row.attempts[1].provider_id, first->id()) << "the requeue goes elsewhere";
    EXPECT_EQ(row.attempts[1].state, "running") << describe(row);

    m.advance(40s);
    row = m.stored(id);
    EXPECT_EQ(row.state, "succeeded") << describe(row);
    EXPECT_EQ(row.result.value("attempt", 0), 2) << describe(row);
    EXPECT_EQ(row.attempts.size(), 2u) << "exactly one requeue: " << describe(row);
    EXPECT_EQ(submitted(m), 2) << "the job ran on two providers, once each";
    EXPECT_EQ(m.attempts->bound, 2) << "each attempt's lease was bound to its job";
    EXPECT_EQ(m.clock.pending(), 0u) << "a finished job leaves no timer behind";
  }
}

TEST(MeshJobsSim, ARestartedSupervisorPicksUpTheJobItLeftRunning) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Mesh m(seed, 2);
    mesh::MeshJobSettings settings;
    settings.provider_timeout = 10s;
    settings.checkpoint_interval = 3600s;
    m.start_supervisor(settings);
    std::string id = m.create(sim_job(20'000, 7), 0);
    m.advance(3s);
    m.jobs.reset();  // the daemon stops
    EXPECT_EQ(m.clock.pending(), 0u) << "a stopped supervisor leaves no timer behind";
    m.advance(30s);  // the job ends on its provider meanwhile
    auto row = m.stored(id);
    EXPECT_EQ(row.state, "running") << describe(row);

    m.start_supervisor(settings);
    m.advance(2s);
    row = m.stored(id);
    EXPECT_EQ(row.state, "failed") << "its exit code is the answer: " << describe(row);
    ASSERT_EQ(row.attempts.size(), 1u) << "followed again, not placed again: " << describe(row);
    EXPECT_EQ(row.attempts[0].exit_code, 7);
    EXPECT_EQ(submitted(m), 1);
  }
}

// Twelve jobs with retries over five providers, two of which fail a job at
// a seeded rate, while providers are cut off at seeded times (and come back
// later); a quarter of the jobs fail wherever they run. What each job did.
struct Outcome {
  std::string state;
  std::vector<std::tuple<std::string, std::string, std::optional<int>>> attempts;  // provider, state, exit
  bool operator==(const Outcome&) const = default;
};
constexpr uint64_t kRetries = 2;
constexpr uint32_t kMaxRequeues = 2;

std::vector<std::pair<mesh::MeshJobRow, Outcome>> run_many(uint64_t seed) {
  Mesh m(seed, 5, {0.3, 0.3});
  mesh::MeshJobSettings settings;
  settings.provider_timeout = 8s;
  settings.max_requeues = kMaxRequeues;
  settings.checkpoint_interval = 3600s;
  m.start_supervisor(settings);
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    int exit_code = std::bernoulli_distribution(0.25)(m.rng) ? 3 : 0;
    ids.push_back(m.create(sim_job(4000 + 1000 * static_cast<int>(m.rng() % 8), exit_code), kRetries));
  }
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
    m.advance(2s);
  }
  for (size_t p = 0; p < m.providers.size(); ++p) {
    if (away[p]) {
      EXPECT_TRUE(m.net.connect(*m.consumer, *m.providers[p]).ok());
    }
  }
  m.advance(120s);
  std::vector<std::pair<mesh::MeshJobRow, Outcome>> out;
  for (const auto& id : ids) {
    auto row = m.stored(id);
    Outcome o{row.state, {}};
    for (const auto& a : row.attempts) o.attempts.emplace_back(a.provider_name, a.state, a.exit_code);
    out.emplace_back(std::move(row), std::move(o));
  }
  return out;
}

// Every job finishes exactly once; none ends more attempts than its retries
// allow or loses more than the requeues allow; a failed one used up one or
// the other, or found nobody to run it.
TEST(MeshJobsSim, ManyJobsOverFlakyProvidersEachFinishOnceWithinTheirRetries) {
  int lost = 0, retried = 0, succeeded = 0, failed = 0;
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto jobs = run_many(seed);
    ASSERT_EQ(jobs.size(), 12u);
    for (const auto& [row, outcome] : jobs) {
      SCOPED_TRACE(describe(row));
      ASSERT_TRUE(row.finished()) << "every job finished";
      uint64_t ended = 0, requeued = 0;
      for (const auto& a : row.attempts) {
        if (a.state == "exited" || a.state == "failed") ++ended;
        if (a.state == "lost" || a.state == "not started") ++requeued;
        if (a.state == "lost") ++lost;
        EXPECT_NE(a.state, "running") << "an attempt still running after its job finished";
      }
      if (ended > 1) ++retried;
      EXPECT_LE(ended, kRetries + 1);
      EXPECT_LE(requeued, kMaxRequeues + 1);
      if (row.state == "succeeded") {
        ++succeeded;
        int n = row.result.value("attempt", 0);
        ASSERT_GE(n, 1);
        EXPECT_EQ(row.attempts[static_cast<size_t>(n - 1)].exit_code, 0);
      } else {
        ++failed;
        EXPECT_EQ(row.state, "failed");
        EXPECT_TRUE(ended == kRetries + 1 || requeued == kMaxRequeues + 1 ||
                    row.result.value("reason", "") == "unplaced")
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

TEST(MeshJobsSim, TheSameSeedGivesTheSameRun) {
  for (uint64_t seed : {5u, 77u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto first = run_many(seed);
    auto second = run_many(seed);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_TRUE(first[i].second == second[i].second)
          << "job " << i << ":\n" << describe(first[i].first) << "\nagainst\n" << describe(second[i].first);
    }
  }
}

// An array of 20 tasks, at most 6 at once, over five providers, two of
// which fail a job at a seeded rate while providers are cut off at seeded
// times: the array ends with every task counted once, done or failed.
nlohmann::json run_array(uint64_t seed) {
  Mesh m(seed, 5, {0.3, 0.3});
  mesh::MeshJobSettings settings;
  settings.provider_timeout = 8s;
  settings.max_requeues = 2;
  settings.checkpoint_interval = 3600s;
  m.start_supervisor(settings);
  m.start_arrays();
  auto job = sim_job(5000, 0).to_json();
  auto created = m.call("POST", "/v1/mesh/arrays",
                        {{"job", job}, {"array", "0-19%6"}, {"retries", 2}, {"out", m.consumer->dir + "/array"}});
  if (!created.contains("array_id")) return created;
  std::string id = created["array_id"];
  std::vector<bool> away(m.providers.size(), false);
  for (int step = 0; step < 30; ++step) {
    size_t p = m.rng() % m.providers.size();
    if (m.rng() % 3 == 0) {
      if (away[p]) {
        EXPECT_TRUE(m.net.connect(*m.consumer, *m.providers[p]).ok());
      } else {
        m.net.cut(*m.consumer, *m.providers[p]);
      }
      away[p] = !away[p];
    }
    m.advance(2s);
  }
  for (size_t p = 0; p < m.providers.size(); ++p) {
    if (away[p]) {
      EXPECT_TRUE(m.net.connect(*m.consumer, *m.providers[p]).ok());
    }
  }
  m.advance(240s);
  auto status = m.call("GET", "/v1/mesh/arrays/inspect?id=" + id);
  status["fetches"] = m.attempts->fetches;
  return status;
}

TEST(MeshJobsSim, AnArrayOverFlakyProvidersCountsEveryTaskOnce) {
  uint64_t lost = 0, retried = 0, done = 0;
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto st = run_array(seed);
    SCOPED_TRACE(st.dump());
    ASSERT_TRUE(st.contains("counts"));
    const auto& c = st["counts"];
    EXPECT_TRUE(st["state"] == "done" || st["state"] == "failed");
    EXPECT_EQ(c["done"].get<uint64_t>() + c["failed"].get<uint64_t>(), 20u) << "each task counted once";
    EXPECT_EQ(c["pending"], 0);
    EXPECT_EQ(c["running"], 0);
    EXPECT_EQ(c["attempts_running"], 0);
    EXPECT_GE(st["fetches"].get<uint64_t>(), c["done"].get<uint64_t>()) << "a task is done once its outputs came";
    if (st["state"] == "done") {
      EXPECT_EQ(c["failed"], 0);
    }
    lost += c["lost"].get<uint64_t>();
    retried += c["retried"].get<uint64_t>();
    done += c["done"].get<uint64_t>();
  }
  EXPECT_GT(lost + retried, 0u) << "the seeds reach a loss or a retry";
  EXPECT_GT(done, 0u);
}

TEST(MeshJobsSim, TheSameSeedGivesTheSameArray) {
  auto first = run_array(5);
  auto second = run_array(5);
  ASSERT_TRUE(first.contains("counts")) << first.dump();
  for (const char* key : {"state", "counts", "providers", "fetches"}) {
    EXPECT_EQ(first[key], second[key]) << key;
  }
}

}  // namespace
}  // namespace yonder::sim
