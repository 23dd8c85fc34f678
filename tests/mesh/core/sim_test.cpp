// A deterministic simulation of the mesh's placement and leasing: many
// consumers place jobs over many providers with a manual clock and a seeded
// RNG, interleaving their steps at random. Providers vanish without a word;
// their consumers' lease renewals go unanswered and, a lease term later,
// the jobs are requeued elsewhere. Checked after every step: no device is
// held by two consumers, the provider's book and the consumers agree, and
// at the end every job ran to completion exactly once; two runs with the
// same seed produce the same trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "mesh/core/lease_book.h"
#include "mesh/core/placement.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

constexpr UnixMs kStart = 1'800'000'000'000;
constexpr UnixMs kTick = 100;
constexpr uint64_t kTermMs = 3000;
constexpr UnixMs kAdEveryMs = 1000;
constexpr UnixMs kAdTtlMs = 5000;

PeerKey key(uint32_t n) {
  PeerKey k{};
  for (size_t i = 0; i < 4; ++i) k[31 - i] = static_cast<uint8_t>(n >> (8 * i));
  return k;
}

struct SimProvider {
  PeerKey id{};
  std::vector<GpuOffer> gpus;
  LeaseBook book{0};
  bool alive = true;
  Advertisement last_ad;  // what consumers see: refreshed every kAdEveryMs
  UnixMs next_ad = 0;
};

struct SimJob {
  uint64_t id = 0;
  uint32_t gpus = 1;
  uint64_t vram = 0;
  UnixMs run_ms = 0;  // how long it runs once started
  int starts = 0;
  int completions = 0;
};

struct Running {
  size_t job = 0;
  size_t provider = 0;
  uint64_t lease_id = 0;
  std::vector<uint32_t> devices;
  UnixMs expires = 0;  // as the consumer was told
  UnixMs done_at = 0;
  UnixMs next_renew = 0;
};

struct SimConsumer {
  PeerKey id{};
  std::vector<size_t> queue;  // job indices
  std::vector<Running> running;
};

struct SimResult {
  std::string trace;
  size_t requeues = 0;
  size_t refusals = 0;
  size_t completed = 0;
  size_t jobs = 0;
  size_t max_leases = 0;
};

SimResult simulate(uint64_t seed, size_t n_providers, size_t n_consumers, size_t jobs_each) {
  std::mt19937_64 rng(seed);
  SimResult res;
  std::vector<SimProvider> providers(n_providers);
  for (size_t p = 0; p < n_providers; ++p) {
    auto& pr = providers[p];
    pr.id = key(static_cast<uint32_t>(1000 + p));
    size_t n = 1 + rng() % 4;
    for (size_t i = 0; i < n; ++i) {
      pr.gpus.push_back(rng() % 3 == 0 ? testing::gpu("Tesla T4", 16, 7, 5)
                                       : testing::gpu("NVIDIA A100-SXM4-80GB", 80, 8, 0));
    }
    pr.book = LeaseBook(static_cast<uint32_t>(n));
  }
  std::vector<SimJob> jobs;
  std::vector<SimConsumer> consumers(n_consumers);
  for (size_t c = 0; c < n_consumers; ++c) {
    consumers[c].id = key(static_cast<uint32_t>(1 + c));
    for (size_t k = 0; k < jobs_each; ++k) {
      SimJob j;
      j.id = jobs.size();
      j.gpus = 1 + static_cast<uint32_t>(rng() % 2);
      j.vram = rng() % 2 ? (40ull << 30) : 0;
      j.run_ms = static_cast<UnixMs>(1000 + rng() % 8000);
      consumers[c].queue.push_back(jobs.size());
      jobs.push_back(j);
    }
  }
  res.jobs = jobs.size();
  // A third of the providers vanish at random times in the first minute.
  std::vector<UnixMs> vanish_at(n_providers, -1);
  for (size_t p = 0; p < n_providers; ++p) {
    if (rng() % 3 == 0) vanish_at[p] = kStart + static_cast<UnixMs>(rng() % 60'000);
  }
  auto log = [&](UnixMs now, const std::string& what) {
    res.trace += std::to_string(now - kStart) + " " + what + "\n";
  };

  uint64_t request_id = 0;
  for (UnixMs now = kStart; now < kStart + 30 * 60'000; now += kTick) {
    // Providers: vanish, expire leases, re-advertise.
    for (size_t p = 0; p < n_providers; ++p) {
      auto& pr = providers[p];
      if (pr.alive && vanish_at[p] >= 0 && now >= vanish_at[p]) {
        pr.alive = false;
        log(now, "vanish p" + std::to_string(p));
      }
      if (!pr.alive) continue;
      for (const auto& g : pr.book.expire(now))
        log(now, "expire p" + std::to_string(p) + " l" + std::to_string(g.lease_id));
      if (now >= pr.next_ad) {
        Advertisement ad;
        ad.provider = pr.id;
        ad.gpus = pr.gpus;
        for (uint32_t d = 0; d < ad.gpus.size(); ++d) ad.gpus[d].leased = !pr.book.device_free(d, now);
        ad.issued_at_ms = now;
        ad.expires_at_ms = now + kAdTtlMs;
        pr.last_ad = ad;
        pr.next_ad = now + kAdEveryMs;
      }
    }
    // Consumers, in a random order each tick: the interleaving.
    std::vector<size_t> order(n_consumers);
    for (size_t i = 0; i < n_consumers; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t c : order) {
      auto& con = consumers[c];
      // Running jobs: finish, renew, or give up on a silent provider.
      for (size_t r = 0; r < con.running.size();) {
        Running& run = con.running[r];
        auto& pr = providers[run.provider];
        if (now >= run.expires) {
          // No renewal answer for a whole term: the provider is gone. Requeue.
          log(now, "requeue j" + std::to_string(run.job) + " from p" + std::to_string(run.provider));
          ++res.requeues;
          con.queue.insert(con.queue.begin(), run.job);
          con.running.erase(con.running.begin() + static_cast<long>(r));
          continue;
        }
        if (now >= run.done_at) {
          ++jobs[run.job].completions;
          ++res.completed;
          if (pr.alive) {
            EXPECT_TRUE(pr.book.release(run.lease_id, con.id).ok());
          }
          log(now, "done j" + std::to_string(run.job) + " on p" + std::to_string(run.provider));
          con.running.erase(con.running.begin() + static_cast<long>(r));
          continue;
        }
        if (now >= run.next_renew) {
          run.next_renew = now + static_cast<UnixMs>(kTermMs / 3);
          if (pr.alive) {
            auto renewed = pr.book.renew(run.lease_id, con.id, kTermMs, now);
            EXPECT_TRUE(renewed.ok()) << "a live provider lost a renewed lease";
            if (renewed.ok()) run.expires = renewed->expires_at_ms;
          }
        }
        ++r;
      }
      // One placement per tick per consumer, at most two jobs at once.
      if (con.queue.empty() || con.running.size() >= 2) continue;
      size_t job = con.queue.front();
      Snapshot snap;
      snap.now_ms = now;
      for (const auto& pr : providers) {
        if (pr.last_ad.expires_at_ms == 0) continue;
        ProviderView v;
        v.ad = pr.last_ad;
        v.reputation = 1.0;
        snap.providers.push_back(std::move(v));
      }
      for (const auto& run : con.running) snap.leases.push_back(HeldDevices{providers[run.provider].id, run.devices});
      PlacementRequest req;
      req.gpus = jobs[job].gpus;
      req.vram_bytes = jobs[job].vram;
      req.max_candidates = 4;
      Plan plan = place(snap, req, Weights{});
      for (const auto& cand : plan.ranked) {
        size_t p = static_cast<size_t>(std::find_if(providers.begin(), providers.end(),
                                                    [&](const SimProvider& x) { return x.id == cand.provider; }) -
                                       providers.begin());
        auto& pr = providers[p];
        if (!pr.alive) continue;  // no answer within the offer timeout: next candidate
        LeaseMessage offer;
        offer.request_id = ++request_id;
        offer.gpus = req.gpus;
        offer.vram_bytes = req.vram_bytes;
        offer.term_ms = kTermMs;
        LeaseMessage answer = answer_offer(pr.book, pr.gpus, con.id, offer, now);
        if (answer.kind != LeaseKind::kAccept) {
          ++res.refusals;
          continue;
        }
        Running run;
        run.job = job;
        run.provider = p;
        run.lease_id = answer.lease_id;
        run.devices = answer.devices;
        run.expires = answer.expires_at_ms;
        run.done_at = now + jobs[job].run_ms;
        run.next_renew = now + static_cast<UnixMs>(kTermMs / 3);
        ++jobs[job].starts;
        con.queue.erase(con.queue.begin());
        con.running.push_back(run);
        log(now, "start j" + std::to_string(job) + " on p" + std::to_string(p) + " l" + std::to_string(run.lease_id));
        break;
      }
    }
    // Invariants: among leases consumers believe they hold (on live
    // providers), no device twice; the provider's book agrees.
    size_t leases = 0;
    std::map<std::pair<size_t, uint32_t>, size_t> holder;
    for (size_t c = 0; c < n_consumers; ++c) {
      for (const auto& run : consumers[c].running) {
        if (!providers[run.provider].alive || run.expires <= now) continue;
        ++leases;
        for (uint32_t d : run.devices) {
          auto [it, fresh] = holder.emplace(std::make_pair(run.provider, d), c);
          EXPECT_TRUE(fresh) << "p" << run.provider << " device " << d << " double-booked at " << now - kStart;
          EXPECT_FALSE(providers[run.provider].book.device_free(d, now));
        }
      }
    }
    res.max_leases = std::max(res.max_leases, leases);
    if (res.completed == res.jobs) break;
  }
  for (const auto& j : jobs) {
    EXPECT_EQ(j.completions, 1) << "job " << j.id;
  }
  return res;
}

TEST(MeshSimulation, NoDoubleBookingAndJobsOnVanishedProvidersAreRequeued) {
  SimResult r = simulate(42, 30, 40, 10);
  std::printf("%zu jobs, %zu completed, %zu requeued, %zu refusals, at most %zu leases at once\n", r.jobs, r.completed,
              r.requeues, r.refusals, r.max_leases);
  EXPECT_EQ(r.completed, r.jobs);
  EXPECT_GT(r.requeues, 0u) << "the seed should make some provider vanish mid-job";
  EXPECT_GT(r.refusals, 0u) << "stale advertisements should cause some refusals";
  EXPECT_GT(r.max_leases, 20u);
}

TEST(MeshSimulation, SameSeedSameTrace) {
  SimResult a = simulate(7, 20, 25, 6);
  SimResult b = simulate(7, 20, 25, 6);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.completed, a.jobs);
  SimResult c = simulate(8, 20, 25, 6);
  EXPECT_NE(a.trace, c.trace);
}

}  // namespace
}  // namespace yonder::mesh
