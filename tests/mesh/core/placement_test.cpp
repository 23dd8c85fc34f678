// Placement properties over seeded random snapshots, and the lease book.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "mesh/core/lease_book.h"
#include "mesh/core/placement.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

constexpr UnixMs kPlacementNow = 1'800'000'000'000;

PeerKey key(uint32_t n) {
  PeerKey k{};
  for (size_t i = 0; i < 4; ++i) k[31 - i] = static_cast<uint8_t>(n >> (8 * i));
  return k;
}

// Unsigned advertisements: placement trusts its caller to have verified them.
Snapshot random_snapshot(std::mt19937_64& rng, size_t providers) {
  const char* models[] = {"NVIDIA GeForce RTX 4090", "NVIDIA A100-SXM4-80GB", "Tesla T4"};
  const uint64_t mem[] = {24, 80, 16};
  const uint32_t cap[] = {809, 800, 705};
  Snapshot s;
  s.now_ms = kPlacementNow;
  for (size_t p = 0; p < providers; ++p) {
    ProviderView v;
    v.ad.provider = key(static_cast<uint32_t>(p + 1));
    size_t n = rng() % 9;
    for (size_t i = 0; i < n; ++i) {
      size_t m = rng() % 3;
      v.ad.gpus.push_back(testing::gpu(models[m], mem[m], cap[m] / 100, cap[m] % 100, rng() % 4 == 0));
    }
    v.ad.queue_depth = static_cast<uint32_t>(rng() % 5);
    if (rng() % 2) v.ad.labels["site"] = rng() % 2 ? "lab1" : "lab2";
    // Some stale or not-yet-valid advertisements.
    UnixMs age = static_cast<UnixMs>(rng() % 10) == 0 ? 120'000 : static_cast<UnixMs>(rng() % 30'000);
    v.ad.issued_at_ms = kPlacementNow - age;
    v.ad.expires_at_ms = v.ad.issued_at_ms + 60'000;
    v.path_quality = static_cast<double>(rng() % 3) / 2.0;
    v.rtt_ms = static_cast<double>(rng() % 200);
    v.reputation = static_cast<double>(rng() % 5) / 4.0;
    v.credit = static_cast<double>(static_cast<int64_t>(rng() % 20000) - 10000);
    if (rng() % 3 != 0) v.groups.push_back("g1");
    if (!v.ad.gpus.empty() && rng() % 5 == 0) {
      s.leases.push_back(HeldDevices{v.ad.provider, {static_cast<uint32_t>(rng() % v.ad.gpus.size())}});
    }
    s.providers.push_back(std::move(v));
  }
  return s;
}

PlacementRequest random_job(std::mt19937_64& rng) {
  PlacementRequest j;
  j.gpus = 1 + static_cast<uint32_t>(rng() % 3);
  j.vram_bytes = (rng() % 2 ? 20ull : 40ull) << 30;
  if (rng() % 2) j.vram_bytes = 0;
  j.min_capability = rng() % 2 ? 800 : 0;
  if (rng() % 3 == 0) j.labels["site"] = "lab2";
  if (rng() % 3 == 0) j.group = "g1";
  j.max_candidates = 1 + rng() % 10;
  return j;
}

std::vector<uint32_t> held_for(const Snapshot& s, const PeerKey& p) {
  std::vector<uint32_t> h;
  for (const auto& l : s.leases) {
    if (l.provider == p) h.insert(h.end(), l.devices.begin(), l.devices.end());
  }
  return h;
}

// The reference: feasibility of every provider, ranking by (score, key), by brute force.
size_t feasible_count(const Snapshot& s, const PlacementRequest& j) {
  size_t n = 0;
  for (const auto& v : s.providers) n += feasible_devices(v, held_for(s, v.ad.provider), j, s.now_ms).has_value();
  return n;
}

TEST(Placement, EveryPlannedProviderIsFeasibleAndNoneIsMissed) {
  std::mt19937_64 rng(1);
  Weights w;
  size_t ranked = 0, empty = 0;
  for (int round = 0; round < 300; ++round) {
    Snapshot s = random_snapshot(rng, 1 + rng() % 60);
    PlacementRequest j = random_job(rng);
    Plan plan = place(s, j, w);
    ranked += plan.ranked.size();
    empty += plan.ranked.empty();
    EXPECT_EQ(plan.ranked.size(), std::min(j.max_candidates, feasible_count(s, j)));
    for (size_t i = 0; i < plan.ranked.size(); ++i) {
      const auto& c = plan.ranked[i];
      auto it = std::find_if(s.providers.begin(), s.providers.end(),
                             [&](const ProviderView& v) { return v.ad.provider == c.provider; });
      ASSERT_NE(it, s.providers.end());
      auto devices = feasible_devices(*it, held_for(s, c.provider), j, s.now_ms);
      ASSERT_TRUE(devices.has_value()) << "round " << round;
      EXPECT_EQ(c.devices.size(), j.gpus);
      for (uint32_t d : c.devices) {
        EXPECT_FALSE(it->ad.gpus[d].leased);
        EXPECT_GE(it->ad.gpus[d].memory_bytes, j.vram_bytes);
        EXPECT_GE(it->ad.gpus[d].capability(), j.min_capability);
      }
      if (i > 0) {
        const auto& prev = plan.ranked[i - 1];
        EXPECT_TRUE(prev.score > c.score || (prev.score == c.score && prev.provider < c.provider));
      }
    }
    // Nothing feasible is ranked below where it belongs: every feasible
    // provider left out scores no better than the last one in the plan.
    if (!plan.ranked.empty() && plan.ranked.size() == j.max_candidates) {
      PlacementRequest all = j;
      all.max_candidates = s.providers.size();
      Plan full = place(s, all, w);
      ASSERT_GE(full.ranked.size(), plan.ranked.size());
      EXPECT_TRUE(std::equal(plan.ranked.begin(), plan.ranked.end(), full.ranked.begin()));
    }
  }
  // The generator exercises both outcomes.
  EXPECT_GT(ranked, 500u);
  EXPECT_GT(empty, 10u);
}

// An unverified GPU claim weighs a provider down, never up: confirming one
// provider's claim never lowers its place, and between two providers that
// differ only in that, the confirmed one ranks first.
TEST(Placement, AConfirmedGpuClaimNeverLowersAProvidersPlace) {
  std::mt19937_64 rng(7);
  Weights w;
  size_t moved_up = 0;
  for (int round = 0; round < 300; ++round) {
    Snapshot s = random_snapshot(rng, 2 + rng() % 40);
    for (auto& v : s.providers) v.gpu_claim_verified = rng() % 2 == 0;
    PlacementRequest j = random_job(rng);
    j.max_candidates = 100;
    Plan before = place(s, j, w);
    if (before.ranked.empty()) continue;
    // Confirm the claim of one unverified, ranked provider.
    auto pick = std::find_if(before.ranked.begin(), before.ranked.end(), [&](const Candidate& c) {
      return std::any_of(s.providers.begin(), s.providers.end(),
                         [&](const ProviderView& v) { return v.ad.provider == c.provider && !v.gpu_claim_verified; });
    });
    if (pick == before.ranked.end()) continue;
    PeerKey chosen = pick->provider;
    size_t old_place = static_cast<size_t>(pick - before.ranked.begin());
    for (auto& v : s.providers) {
      if (v.ad.provider == chosen) v.gpu_claim_verified = true;
    }
    Plan after = place(s, j, w);
    ASSERT_EQ(after.ranked.size(), before.ranked.size()) << "round " << round;  // feasibility is unchanged
    auto now_at = std::find_if(after.ranked.begin(), after.ranked.end(),
                               [&](const Candidate& c) { return c.provider == chosen; });
    ASSERT_NE(now_at, after.ranked.end());
    size_t new_place = static_cast<size_t>(now_at - after.ranked.begin());
    EXPECT_LE(new_place, old_place) << "round " << round;
    EXPECT_NEAR(now_at->score - pick->score, w.unverified_gpu, 1e-9);
    moved_up += new_place < old_place;
  }
  EXPECT_GT(moved_up, 20u);  // the term matters often enough to be seen
}

// A forged inventory: a provider claiming 64 H100s that no
// GPU check has confirmed, against an honest provider with one confirmed
// GPU, everything else equal: the honest one is asked first.
TEST(Placement, AnUnconfirmedInventoryRanksBelowAConfirmedOne) {
  Snapshot s;
  s.now_ms = kPlacementNow;
  ProviderView liar, honest;
  liar.ad.provider = key(1);
  honest.ad.provider = key(2);
  for (int i = 0; i < 64; ++i) liar.ad.gpus.push_back(testing::gpu("NVIDIA H100 80GB HBM3", 80, 9, 0));
  honest.ad.gpus.push_back(testing::gpu("NVIDIA GeForce RTX 4090", 24, 8, 9));
  honest.gpu_claim_verified = true;
  for (auto* v : {&liar, &honest}) {
    v->ad.issued_at_ms = kPlacementNow - 1000;
    v->ad.expires_at_ms = kPlacementNow + 60'000;
    v->reputation = 0.5;
    s.providers.push_back(*v);
  }
  Plan plan = place(s, PlacementRequest{}, Weights{});
  ASSERT_EQ(plan.ranked.size(), 2u);
  EXPECT_EQ(plan.ranked[0].provider, honest.ad.provider);
  EXPECT_NEAR(plan.ranked[0].score - plan.ranked[1].score, Weights{}.unverified_gpu, 1e-9);
}

TEST(Placement, RankingIsStableUnderPermutation) {
  std::mt19937_64 rng(2);
  Weights w;
  for (int round = 0; round < 200; ++round) {
    Snapshot s = random_snapshot(rng, 1 + rng() % 60);
    PlacementRequest j = random_job(rng);
    j.max_candidates = 100;
    Plan a = place(s, j, w);
    std::shuffle(s.providers.begin(), s.providers.end(), rng);
    std::shuffle(s.leases.begin(), s.leases.end(), rng);
    EXPECT_EQ(place(s, j, w), a) << "round " << round;
  }
}

TEST(Placement, AddingFreeCapacityNeverLowersAProvider) {
  std::mt19937_64 rng(3);
  Weights w;
  for (int round = 0; round < 300; ++round) {
    Snapshot s = random_snapshot(rng, 2 + rng() % 40);
    PlacementRequest j = random_job(rng);
    j.max_candidates = 1000;
    size_t target = rng() % s.providers.size();
    PeerKey who = s.providers[target].ad.provider;
    Plan before = place(s, j, w);
    s.providers[target].ad.gpus.push_back(testing::gpu("NVIDIA A100-SXM4-80GB", 80, 9, 0));
    Plan after = place(s, j, w);
    auto rank = [&](const Plan& p) {
      for (size_t i = 0; i < p.ranked.size(); ++i) {
        if (p.ranked[i].provider == who) return static_cast<long>(i);
      }
      return -1L;
    };
    long rb = rank(before), ra = rank(after);
    if (rb >= 0) {
      ASSERT_GE(ra, 0) << "round " << round << ": more capacity made it infeasible";
      EXPECT_LE(ra, rb) << "round " << round;
      EXPECT_GE(after.ranked[static_cast<size_t>(ra)].score, before.ranked[static_cast<size_t>(rb)].score);
    }
  }
}

TEST(Placement, ScoreOrdersByStartReputationPathAndCredit) {
  Snapshot s;
  s.now_ms = kPlacementNow;
  auto view = [&](uint32_t n) {
    ProviderView v;
    v.ad.provider = key(n);
    v.ad.gpus = {testing::gpu("NVIDIA GeForce RTX 4090", 24, 8, 9)};
    v.ad.issued_at_ms = kPlacementNow;
    v.ad.expires_at_ms = kPlacementNow + 60'000;
    v.reputation = 1.0;
    return v;
  };
  ProviderView busy = view(1), low_rep = view(2), far = view(3), best = view(4), tie = view(5);
  busy.ad.queue_depth = 3;
  low_rep.reputation = 0.2;
  far.rtt_ms = 150;
  s.providers = {busy, low_rep, far, tie, best};
  PlacementRequest j;
  Plan p = place(s, j, Weights{});
  ASSERT_EQ(p.ranked.size(), 5u);
  EXPECT_EQ(p.ranked[0].provider, key(4));  // 3.0; best and tie score the same: lower key first
  EXPECT_EQ(p.ranked[1].provider, key(5));
  EXPECT_EQ(p.ranked[2].provider, key(3));  // 2.25: rtt
  EXPECT_EQ(p.ranked[3].provider, key(2));  // 1.4: reputation
  EXPECT_EQ(p.ranked[4].provider, key(1));  // 0: three queued jobs
  EXPECT_DOUBLE_EQ(p.ranked[4].expected_start_s, 180.0);
}

TEST(Placement, StaleOrFutureAdvertisementsAndLeasedDevicesAreNeverRanked) {
  Snapshot s;
  s.now_ms = kPlacementNow;
  ProviderView v;
  v.ad.provider = key(1);
  v.ad.gpus = {testing::gpu("Tesla T4", 16, 7, 5)};
  v.ad.issued_at_ms = kPlacementNow - 70'000;
  v.ad.expires_at_ms = kPlacementNow - 10'000;
  s.providers = {v};
  EXPECT_TRUE(place(s, PlacementRequest{}, Weights{}).ranked.empty());
  s.providers[0].ad.issued_at_ms = kPlacementNow + 2 * kMaxClockSkewMs;
  s.providers[0].ad.expires_at_ms = kPlacementNow + 3 * kMaxClockSkewMs;
  EXPECT_TRUE(place(s, PlacementRequest{}, Weights{}).ranked.empty());
  s.providers[0].ad.issued_at_ms = kPlacementNow;
  EXPECT_EQ(place(s, PlacementRequest{}, Weights{}).ranked.size(), 1u);
  s.leases.push_back(HeldDevices{key(1), {0}});
  EXPECT_TRUE(place(s, PlacementRequest{}, Weights{}).ranked.empty());
}

TEST(LeaseBook, GrantsAtMostOneHolderAndExpires) {
  LeaseBook book(4);
  PeerKey a = key(1), b = key(2);
  auto g = book.grant(a, {0, 1}, 1000, kPlacementNow);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(book.grant(b, {1, 2}, 1000, kPlacementNow).error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(book.grant(b, {2, 3}, 1000, kPlacementNow).ok());
  EXPECT_FALSE(book.grant(b, {4}, 1000, kPlacementNow).ok());
  EXPECT_FALSE(book.grant(b, {}, 1000, kPlacementNow).ok());
  EXPECT_EQ(book.next_deadline(), kPlacementNow + 1000);
  // b cannot renew or release a's lease; a can renew.
  EXPECT_FALSE(book.renew(g->lease_id, b, 1000, kPlacementNow + 500).ok());
  EXPECT_FALSE(book.release(g->lease_id, b).ok());
  EXPECT_TRUE(book.renew(g->lease_id, a, 1000, kPlacementNow + 500).ok());
  // At kPlacementNow + 1000 b's lease is gone and a's lives until kPlacementNow + 1500.
  EXPECT_EQ(book.expire(kPlacementNow + 1000).size(), 1u);
  EXPECT_TRUE(book.device_free(2, kPlacementNow + 1000));
  EXPECT_FALSE(book.device_free(0, kPlacementNow + 1000));
  // An expired lease cannot be renewed; the device goes to the next asker.
  EXPECT_TRUE(book.grant(b, {0}, 1000, kPlacementNow + 1500).ok());
  EXPECT_FALSE(book.renew(g->lease_id, a, 1000, kPlacementNow + 1500).ok());
}

TEST(LeaseBook, NoDoubleBookingUnderConcurrentLeases) {
  // 64 consumers interleaved at random over one 8-GPU provider: offers,
  // renewals, releases and silent disappearances; after every step no
  // device is in two unexpired leases and every lease the book holds
  // matches what its consumer was told.
  std::mt19937_64 rng(4);
  std::vector<GpuOffer> gpus;
  for (int i = 0; i < 8; ++i) gpus.push_back(testing::gpu("NVIDIA A100-SXM4-80GB", 80, 8, 0));
  LeaseBook book(8);
  struct Held {
    uint64_t lease_id = 0;
    std::vector<uint32_t> devices;
    UnixMs expires = 0;
  };
  std::vector<std::optional<Held>> held(64);
  UnixMs now = kPlacementNow;
  size_t accepted = 0, refused = 0;
  for (int step = 0; step < 20000; ++step) {
    now += static_cast<UnixMs>(rng() % 50);
    size_t c = rng() % held.size();
    PeerKey who = key(static_cast<uint32_t>(c + 100));
    if (held[c] && held[c]->expires <= now) held[c].reset();  // the consumer sees it lapse too
    if (!held[c]) {
      LeaseMessage offer;
      offer.request_id = static_cast<uint64_t>(step);
      offer.gpus = 1 + static_cast<uint32_t>(rng() % 3);
      offer.term_ms = 200 + rng() % 1000;
      LeaseMessage answer = answer_offer(book, gpus, who, offer, now);
      if (answer.kind == LeaseKind::kAccept) {
        ++accepted;
        held[c] = Held{answer.lease_id, answer.devices, answer.expires_at_ms};
      } else {
        ++refused;
        EXPECT_EQ(answer.refuse_reason, RefuseReason::kBusy);
      }
    } else if (rng() % 3 == 0) {
      ASSERT_TRUE(book.release(held[c]->lease_id, who).ok());
      held[c].reset();
    } else if (rng() % 2 == 0) {
      auto r = book.renew(held[c]->lease_id, who, 500, now);
      ASSERT_TRUE(r.ok());
      held[c]->expires = r->expires_at_ms;
    }  // else: the consumer stays silent this step
    std::vector<int> owners(8, -1);
    for (size_t i = 0; i < held.size(); ++i) {
      if (!held[i] || held[i]->expires <= now) continue;
      for (uint32_t d : held[i]->devices) {
        ASSERT_EQ(owners[d], -1) << "device " << d << " double-booked at step " << step;
        owners[d] = static_cast<int>(i);
      }
    }
    for (uint32_t d = 0; d < 8; ++d) EXPECT_EQ(book.device_free(d, now), owners[d] == -1);
  }
  EXPECT_GT(accepted, 1000u);
  EXPECT_GT(refused, 1000u);
}

}  // namespace
}  // namespace yonder::mesh
