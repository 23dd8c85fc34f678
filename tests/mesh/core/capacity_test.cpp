// What the mesh tells a person (mesh/core/capacity.h), and the provider's answer
// to an offer when devices are held outside the lease book.
#include <gtest/gtest.h>

#include "mesh/core/capacity.h"
#include "mesh/core/lease_book.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

TEST(Capacity, LabelsParseWithSpacesAndEmptyItems) {
  auto l = parse_labels(" site=lab2 , gpu=rtx4090,,tier=a=b ");
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(*l, (std::map<std::string, std::string>{{"gpu", "rtx4090"}, {"site", "lab2"}, {"tier", "a=b"}}));
  EXPECT_TRUE(parse_labels("").value().empty());
}

TEST(Capacity, BadLabelsAreRefusedWithTheRule) {
  for (const char* bad : {"site", "=lab2", "si te=x", "site=lab 2", "a=1,a=2", "k=\x01"}) {
    auto l = parse_labels(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.error().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_NE(parse_labels("a=1,a=2").error().message().find("given twice"), std::string::npos);
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_FALSE(parse_labels(many).ok());
  EXPECT_FALSE(parse_labels(std::string(64, 'k') + "=v").ok());
}

TEST(Capacity, ScorePartsAddUpToPlacementsScore) {
  UnixMs now = 1'700'000'000'000;
  Snapshot s;
  s.now_ms = now;
  ProviderView v;
  v.ad = testing::sample_ad(testing::identity(1), now);
  v.path_quality = 0.5;
  v.rtt_ms = 40;
  v.reputation = 0.8;
  v.credit = 1200;
  s.providers.push_back(v);
  PlacementRequest job;
  Weights w;
  Plan plan = place(s, job, w);
  ASSERT_EQ(plan.ranked.size(), 1u);
  ScoreParts p = score_parts(v, plan.ranked[0].expected_start_s, w);
  EXPECT_NEAR(p.total, plan.ranked[0].score, 1e-9);
  EXPECT_NEAR(p.reputation, 1.6, 1e-9);
  EXPECT_NEAR(p.path, 0.5, 1e-9);
  EXPECT_NEAR(p.rtt, -0.2, 1e-9);
  EXPECT_NEAR(p.start, -2.0, 1e-9);  // queue 2 x 60 s over 1 free device = 2 minutes
  EXPECT_NEAR(p.credit, 0.5 * 1200 / (1200 + 3600.0), 1e-9);
  EXPECT_NEAR(p.unverified, -1.0, 1e-9);  // no GPU check has confirmed its claim
  EXPECT_EQ(describe_score(p),
            "score -0.97 = reputation 1.60 + path 0.50 - rtt 0.20 - start 2.00 + credit 0.12 - unverified GPU 1.00");
  v.gpu_claim_verified = true;
  p = score_parts(v, plan.ranked[0].expected_start_s, w);
  EXPECT_NEAR(p.unverified, 0.0, 1e-9);
  EXPECT_EQ(describe_score(p), "score 0.03 = reputation 1.60 + path 0.50 - rtt 0.20 - start 2.00 + credit 0.12");
}

TEST(Capacity, TheInfeasibleMessageNamesTheRequestAndWhereToLook) {
  PlacementRequest job;
  job.gpus = 2;
  job.vram_bytes = uint64_t{24} << 30;
  EXPECT_EQ(nothing_feasible(job, 2).message(),
            "no paired provider has 2 free GPUs with 24 GiB; `yonder mesh` shows what there is");
  job.gpus = 1;
  job.vram_bytes = uint64_t{1536} << 20;
  job.min_capability = 806;
  job.labels = {{"site", "lab2"}};
  EXPECT_EQ(describe_request(job), "1 free GPU with 1.50 GiB, compute capability 8.6 and label site=lab2");
  EXPECT_EQ(nothing_feasible(job, 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(nothing_feasible(job, 0).message().find("no paired provider answered"), std::string::npos);
}

TEST(Capacity, DevicesHeldOutsideTheBookMakeAnOfferBusyNotInfeasible) {
  std::vector<GpuOffer> gpus = {testing::gpu("A", 24, 8, 0, true), testing::gpu("A", 24, 8, 0)};
  LeaseBook book(2);
  PeerKey a = testing::identity(1).public_key(), b = testing::identity(2).public_key();
  LeaseMessage offer;
  offer.request_id = 1;
  offer.gpus = 1;
  offer.term_ms = 1000;
  LeaseMessage first = answer_offer(book, gpus, a, offer, 0);
  ASSERT_EQ(first.kind, LeaseKind::kAccept);
  EXPECT_EQ(first.devices, std::vector<uint32_t>{1});  // device 0 is held by a job outside the mesh
  LeaseMessage second = answer_offer(book, gpus, b, offer, 1);
  ASSERT_EQ(second.kind, LeaseKind::kRefuse);
  EXPECT_EQ(second.refuse_reason, RefuseReason::kBusy);
  offer.gpus = 3;
  EXPECT_EQ(answer_offer(book, gpus, b, offer, 1).refuse_reason, RefuseReason::kInfeasible);
}

}  // namespace
}  // namespace yonder::mesh
