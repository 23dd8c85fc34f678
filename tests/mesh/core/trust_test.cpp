// Credits and tit-for-tat, EigenTrust against a clique, the quorum, gossip.
#include <gtest/gtest.h>

#include <random>

#include "mesh/core/gossip.h"
#include "mesh/core/ledger.h"
#include "mesh/core/metering.h"
#include "mesh/core/placement.h"
#include "mesh/core/quorum.h"
#include "mesh/core/reputation.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

using testing::identity;
using testing::receipt;
constexpr UnixMs kTrustNow = 1'800'000'000'000;
constexpr UnixMs kDay = 24ll * 3600 * 1000;

TEST(Ledger, BalancesAreGivenMinusTakenTimesTheModelFactor) {
  auto me = identity(1), a = identity(2), b = identity(3);
  CreditParams params;
  Ledger ledger(me.public_key(), params);
  EXPECT_DOUBLE_EQ(ledger.balance(a.public_key(), kTrustNow), params.starting_allowance);
  // a served us an hour on an A100 (factor 2); we served a half an hour on a 4090 (1).
  ASSERT_TRUE(ledger.add(receipt(a, me, "j1", 3600, kTrustNow, "NVIDIA A100-SXM4-80GB")).ok());
  ASSERT_TRUE(ledger.add(receipt(me, a, "j2", 1800, kTrustNow)).ok());
  EXPECT_DOUBLE_EQ(ledger.net(a.public_key()), 7200.0 - 1800.0);
  EXPECT_DOUBLE_EQ(ledger.balance(a.public_key(), kTrustNow), params.starting_allowance + 5400.0);
  // Unknown model: the default factor.
  ASSERT_TRUE(ledger.add(receipt(me, b, "j3", 1000, kTrustNow, "Mystery GPU")).ok());
  EXPECT_DOUBLE_EQ(ledger.net(b.public_key()), -1000.0 * params.default_factor);
  // Counted once; not ours; tampered.
  EXPECT_EQ(ledger.add(receipt(a, me, "j1", 3600, kTrustNow, "NVIDIA A100-SXM4-80GB")).error().code(),
            ErrorCode::kAlreadyExists);
  EXPECT_EQ(ledger.add(receipt(a, b, "j4", 10, kTrustNow)).error().code(), ErrorCode::kFailedPrecondition);
  Receipt forged = receipt(a, me, "j5", 10, kTrustNow);
  forged.gpu_seconds = 100000;
  EXPECT_FALSE(ledger.add(forged).ok());
}

TEST(Ledger, LongIdleBalancesDecayTowardsTheAllowance) {
  auto me = identity(1), a = identity(2);
  CreditParams params;
  Ledger ledger(me.public_key(), params);
  ASSERT_TRUE(ledger.add(receipt(a, me, "j1", 10000, kTrustNow, "NVIDIA GeForce RTX 4090")).ok());
  EXPECT_DOUBLE_EQ(ledger.balance(a.public_key(), kTrustNow + 7 * kDay), params.starting_allowance + 10000);
  EXPECT_NEAR(ledger.balance(a.public_key(), kTrustNow + 7 * kDay + params.half_life_ms), params.starting_allowance + 5000,
              1e-6);
  EXPECT_NEAR(ledger.balance(a.public_key(), kTrustNow + 3650 * kDay), params.starting_allowance, 1.0);
}

TEST(Ledger, QueueServesContributorsFirstThenNewcomersThenDebtorsEachByArrival) {
  auto me = identity(1), giver = identity(2), newcomer = identity(3), taker = identity(4), giver2 = identity(5);
  Ledger ledger(me.public_key(), CreditParams{});
  ASSERT_TRUE(ledger.add(receipt(giver, me, "g1", 500, kTrustNow)).ok());
  ASSERT_TRUE(ledger.add(receipt(giver2, me, "g2", 50000, kTrustNow)).ok());
  ASSERT_TRUE(ledger.add(receipt(me, taker, "t1", 10000, kTrustNow)).ok());  // past the allowance
  std::vector<QueuedRequest> q = {
      {1, taker.public_key(), kTrustNow + 1}, {2, newcomer.public_key(), kTrustNow + 2}, {3, giver.public_key(), kTrustNow + 3},
      {4, taker.public_key(), kTrustNow + 4}, {5, giver2.public_key(), kTrustNow + 5},   {6, newcomer.public_key(), kTrustNow + 2},
  };
  auto ordered = order_queue(q, ledger, kTrustNow + 10);
  std::vector<uint64_t> ids;
  for (const auto& r : ordered) ids.push_back(r.request_id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{3, 5, 2, 6, 1, 4}));
}

// Honest: owner O (pre-trusted) and peers H1..H4 serve each other. Clique:
// C1..C5 sign huge fake receipts among themselves, never serving honest peers.
TEST(Reputation, ACliqueOfFakeReceiptsGainsNoStanding) {
  std::vector<Identity> honest, clique;
  for (uint32_t i = 0; i < 5; ++i) honest.push_back(identity(100 + i));
  for (uint32_t i = 0; i < 5; ++i) clique.push_back(identity(200 + i));
  std::vector<Receipt> rs;
  int job = 0;
  std::mt19937_64 rng(5);
  for (int k = 0; k < 40; ++k) {
    size_t p = rng() % 5, c = rng() % 5;
    if (p == c) continue;
    rs.push_back(receipt(honest[p], honest[c], "h" + std::to_string(job++), 600 + rng() % 3600, kTrustNow));
  }
  for (int k = 0; k < 200; ++k) {
    size_t p = rng() % 5, c = rng() % 5;
    if (p == c) continue;
    rs.push_back(receipt(clique[p], clique[c], "c" + std::to_string(job++), 1'000'000, kTrustNow));
  }
  // A clique member also consumed from honest peers (that earns it nothing).
  rs.push_back(receipt(honest[1], clique[0], "x" + std::to_string(job++), 3600, kTrustNow));
  auto result = compute_trust(rs, {}, {honest[0].public_key()}, TrustParams{});
  ASSERT_TRUE(result.converged);
  double min_honest = 1, max_clique = 0;
  for (size_t i = 1; i < honest.size(); ++i) min_honest = std::min(min_honest, result.global[honest[i].public_key()]);
  for (const auto& c : clique) max_clique = std::max(max_clique, result.global[c.public_key()]);
  EXPECT_GT(min_honest, 0.01);
  EXPECT_LT(max_clique, 1e-9);
  EXPECT_LT(max_clique, min_honest);
  EXPECT_EQ(result.normalised(clique[0].public_key()),
            result.global[clique[0].public_key()] /
                std::max_element(result.global.begin(), result.global.end(), [](auto& a, auto& b) {
                  return a.second < b.second;
                })->second);
}

TEST(Reputation, OutvotedProvidersLoseTrustAndResultsAreDeterministic) {
  auto o = identity(1), good = identity(2), liar = identity(3);
  std::vector<Receipt> rs = {receipt(good, o, "a", 3600, kTrustNow), receipt(liar, o, "b", 3600, kTrustNow)};
  auto before = compute_trust(rs, {}, {o.public_key()}, TrustParams{});
  EXPECT_NEAR(before.global[good.public_key()], before.global[liar.public_key()], 1e-12);
  std::vector<VerificationOutcome> outcomes = {{o.public_key(), liar.public_key(), false, false},
                                               {o.public_key(), good.public_key(), true, false}};
  auto after = compute_trust(rs, outcomes, {o.public_key()}, TrustParams{});
  EXPECT_GT(after.global[good.public_key()], after.global[liar.public_key()]);
  // Same inputs in another order: bit-for-bit the same.
  std::vector<Receipt> reversed(rs.rbegin(), rs.rend());
  std::vector<VerificationOutcome> rev_out(outcomes.rbegin(), outcomes.rend());
  auto again = compute_trust(reversed, rev_out, {o.public_key()}, TrustParams{});
  EXPECT_EQ(again.global, after.global);
  EXPECT_EQ(again.iterations, after.iterations);
}

TEST(Reputation, OneReceiptAddsAtMostTheCap) {
  auto o = identity(1), modest = identity(2), boastful = identity(3);
  std::vector<Receipt> rs = {receipt(modest, o, "a", 3600, kTrustNow),
                             receipt(boastful, o, "b", kMaxReceiptGpuSeconds, kTrustNow)};
  auto t = compute_trust(rs, {}, {o.public_key()}, TrustParams{});
  EXPECT_NEAR(t.global[modest.public_key()], t.global[boastful.public_key()], 1e-12);
  // One dispute takes away what one receipt can add.
  std::vector<VerificationOutcome> disputed = {{o.public_key(), boastful.public_key(), false, false}};
  t = compute_trust(rs, disputed, {o.public_key()}, TrustParams{});
  EXPECT_DOUBLE_EQ(t.normalised(boastful.public_key()), 0.0);
}

// A provider that lies about usage: a consumer ran 4 jobs of 4 s on 4 GPUs
// on each of two providers; the liar signed each as 2,380 GPU-seconds and
// exit 0 (they exited 3). Countersigned as they came, the liar's receipts
// would capture placement; judged against what the consumer saw, they are
// disputes, and every job goes to the honest provider.
TEST(Reputation, PlacementIsNotCapturedByForgedReceipts) {
  auto me = identity(1), honest = identity(2), liar = identity(3);
  const UnixMs submit = kTrustNow;
  auto facts = [&](const Identity& provider, const std::string& job) {
    ConsumerJobFacts f;
    f.job_id = job;
    f.self = me.public_key();
    f.provider = provider.public_key();
    f.gpus_requested = 4;
    f.exit_code = 3;
    f.submitted_ms = submit;
    f.first_seen_running_ms = submit + 1000;
    f.seen_ended_ms = submit + 5000;
    f.now_ms = submit + 6000;
    return f;
  };
  auto claim = [&](const Identity& provider, const std::string& job, int64_t start_s, int64_t end_s, int code) {
    JobEnd e;
    e.job_id = job;
    e.consumer = me.public_key();
    e.gpu_model = "NVIDIA GeForce RTX 4090";
    e.devices = 4;
    e.start_s = start_s;
    e.end_s = end_s;
    e.exit_code = code;
    e.output_hash = testing::hash_of(7);
    Receipt r = receipt_for_job_end(e);
    sign_receipt_as_provider(r, provider);
    return r;
  };
  std::vector<Receipt> judged, as_they_came;
  std::vector<VerificationOutcome> outcomes;
  for (int k = 0; k < 4; ++k) {
    std::string n = std::to_string(k);
    int64_t s = submit / 1000 + 1;
    int64_t forged_start = (submit - kReceiptClockSkewMs) / 1000 + 5;
    for (auto [provider, r] : {std::pair{&honest, claim(honest, "h" + n, s, s + 4, 3)},
                               std::pair{&liar, claim(liar, "l" + n, forged_start, forged_start + 595, 0)}}) {
      auto f = facts(*provider, r.job_id);
      ASSERT_TRUE(check_receipt_for_job(r, f).ok());
      Receipt countersigned = r;
      ASSERT_TRUE(countersign_receipt(countersigned, me).ok());
      as_they_came.push_back(countersigned);
      auto verdict = judge_receipt(r, f);
      if (verdict.kind == MeteringVerdict::Kind::kDisagree) {
        outcomes.push_back({me.public_key(), provider->public_key(), false, false});
        continue;
      }
      if (verdict.kind == MeteringVerdict::Kind::kClamped) r.consumer_view = verdict.view;
      ASSERT_TRUE(countersign_receipt(r, me).ok());
      judged.push_back(r);
    }
  }
  EXPECT_EQ(judged.size(), 4u);    // the honest provider's, as they came
  EXPECT_EQ(outcomes.size(), 4u);  // the liar's, each a dispute

  auto plan_for = [&](const TrustResult& trust) {
    Snapshot snap;
    snap.now_ms = kTrustNow;
    for (const Identity* p : {&honest, &liar}) {
      ProviderView v;
      v.ad.provider = p->public_key();
      v.ad.gpus.assign(4, testing::gpu("NVIDIA GeForce RTX 4090", 24, 8, 9));
      v.ad.issued_at_ms = kTrustNow;
      v.ad.expires_at_ms = kTrustNow + 60'000;
      v.reputation = trust.normalised(p->public_key());
      snap.providers.push_back(v);
    }
    PlacementRequest job;
    job.gpus = 4;
    int to_liar = 0;
    for (int k = 0; k < 4; ++k) {
      Plan p = place(snap, job, Weights{});
      if (!p.ranked.empty() && p.ranked[0].provider == liar.public_key()) ++to_liar;
    }
    return to_liar;
  };
  auto captured = compute_trust(as_they_came, {}, {me.public_key()}, TrustParams{});
  EXPECT_GT(captured.normalised(liar.public_key()), captured.normalised(honest.public_key()));
  EXPECT_EQ(plan_for(captured), 4);  // what countersigning as they came led to

  auto trust = compute_trust(judged, outcomes, {me.public_key()}, TrustParams{});
  EXPECT_DOUBLE_EQ(trust.normalised(liar.public_key()), 0.0);
  EXPECT_GT(trust.normalised(honest.public_key()), 0.5);
  EXPECT_EQ(plan_for(trust), 0);
}

TEST(Quorum, OneLyingProviderIsOutvoted) {
  PeerKey a = identity(1).public_key(), b = identity(2).public_key(), c = identity(3).public_key();
  auto d = decide_quorum({{a, testing::hash_of(1)}, {b, testing::hash_of(2)}, {c, testing::hash_of(1)}});
  ASSERT_TRUE(d.accepted.has_value());
  EXPECT_EQ(*d.accepted, testing::hash_of(1));
  EXPECT_EQ(d.outvoted, std::vector<PeerKey>{b});
  EXPECT_EQ(d.agreeing.size(), 2u);
}

TEST(Quorum, TiesAndNoMajorityAreUndecided) {
  PeerKey a = identity(1).public_key(), b = identity(2).public_key(), c = identity(3).public_key(),
          e = identity(4).public_key();
  auto tie = decide_quorum({{a, testing::hash_of(1)}, {b, testing::hash_of(2)}});
  EXPECT_FALSE(tie.accepted.has_value());
  EXPECT_TRUE(tie.outvoted.empty());
  auto spread = decide_quorum(
      {{a, testing::hash_of(1)}, {b, testing::hash_of(1)}, {c, testing::hash_of(2)}, {e, testing::hash_of(3)}});
  EXPECT_FALSE(spread.accepted.has_value());
  // A provider that answers twice, differently, does not get two votes and is outvoted.
  auto hedge = decide_quorum(
      {{a, testing::hash_of(1)}, {b, testing::hash_of(1)}, {c, testing::hash_of(1)}, {c, testing::hash_of(2)}});
  ASSERT_TRUE(hedge.accepted.has_value());
  EXPECT_EQ(hedge.outvoted, std::vector<PeerKey>{c});
  EXPECT_FALSE(decide_quorum({}).accepted.has_value());
}

TEST(Gossip, AMembershipChangeReachesEveryMemberDeterministically) {
  auto run = [](uint64_t seed) {
    auto owner = identity(1);
    const uint32_t n = 50;
    Membership m;
    m.group_id = "0123456789abcdef0123456789abcdef";
    m.name = "club";
    m.version = 1;
    m.owner = owner.public_key();
    for (uint32_t i = 2; i <= n; ++i) {
      Member mem;
      mem.id = identity(i).public_key();
      m.members.push_back(mem);
    }
    sign_membership(m, owner);
    std::mt19937_64 rng(seed);
    auto random = [&rng](uint64_t k) { return rng() % k; };
    std::map<PeerKey, GossipMember> nodes;
    nodes.emplace(owner.public_key(), GossipMember(owner.public_key(), owner.public_key(), GossipParams{}, random));
    for (const auto& mem : m.members) {
      nodes.emplace(mem.id, GossipMember(mem.id, owner.public_key(), GossipParams{}, random));
    }
    EXPECT_TRUE(nodes.at(owner.public_key()).on_membership(m));
    int rounds = 0;
    for (; rounds < 50; ++rounds) {
      size_t have = 0;
      for (auto& [k, node] : nodes) have += node.held().has_value();
      if (have == nodes.size()) break;
      std::vector<GossipSend> wire;
      for (auto& [k, node] : nodes) {
        auto out = node.tick();
        wire.insert(wire.end(), out.begin(), out.end());
      }
      for (const auto& s : wire) nodes.at(s.to).on_membership(s.membership);
    }
    return rounds;
  };
  int r = run(6);
  EXPECT_LT(r, 20);
  EXPECT_EQ(run(6), r);
}

}  // namespace
}  // namespace yonder::mesh
