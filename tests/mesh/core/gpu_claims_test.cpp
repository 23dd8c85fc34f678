// What a consumer believes of a provider's GPU models (mesh/core/gpu_claims.h).
#include <gtest/gtest.h>

#include "mesh/core/gpu_claims.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

using nlohmann::json;

const json kGpuCheck = {{"gpu", true}, {"gpu_model", "NVIDIA H200"}};

TEST(GpuClaims, OnlyAGpuKnownAnswerCheckSpeaksForAModel) {
  EXPECT_TRUE(gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kPassed, kGpuCheck, 1).has_value());
  // The CPU check names the advertised model too, but ran no GPU.
  json cpu = {{"gpu", false}, {"gpu_model", "NVIDIA H200"}};
  EXPECT_FALSE(gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kPassed, cpu, 1).has_value());
  EXPECT_FALSE(gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kPassed, {{"gpu_model", "X"}}, 1));
  EXPECT_FALSE(gpu_check_of("p", CheckKind::kReplica, CheckOutcome::kAgreed, kGpuCheck, 1).has_value());
  EXPECT_FALSE(gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kPassed, {{"gpu", true}}, 1).has_value());
  EXPECT_FALSE(gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kPassed, json::array(), 1).has_value());
  auto failed = gpu_check_of("p", CheckKind::kKnownAnswer, CheckOutcome::kFailed, kGpuCheck, 5);
  ASSERT_TRUE(failed.has_value());
  EXPECT_FALSE(failed->passed);
  EXPECT_EQ(failed->model, "NVIDIA H200");
  EXPECT_EQ(failed->at_ms, 5);
}

TEST(GpuClaims, AClaimIsUnverifiedUntilItsModelPassesAndTheNewestCheckDecides) {
  GpuClaims claims;
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kUnverified);
  claims.add({"p", "NVIDIA H200", true, 10});
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kVerified);
  // Another provider's, or another model's, claim is not confirmed by it.
  EXPECT_EQ(claims.claim("q", "NVIDIA H200"), GpuClaim::kUnverified);
  EXPECT_EQ(claims.claim("p", "NVIDIA H100 80GB HBM3"), GpuClaim::kUnverified);
  // An older failure recorded later changes nothing; a newer one does.
  claims.add({"p", "NVIDIA H200", false, 5});
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kVerified);
  claims.add({"p", "NVIDIA H200", false, 20});
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kFailed);
  // At the same instant a failure wins, whatever the order.
  claims.add({"p", "NVIDIA H200", true, 20});
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kFailed);
  claims.add({"p", "NVIDIA H200", true, 30});
  EXPECT_EQ(claims.claim("p", "NVIDIA H200"), GpuClaim::kVerified);
  EXPECT_STREQ(gpu_claim_name(GpuClaim::kFailed), "failed");
}

TEST(GpuClaims, AnAdvertisementIsVerifiedOnlyWhenEveryModelItNamesIs) {
  Advertisement ad;
  GpuClaims claims;
  EXPECT_FALSE(claims.verified("p", ad));  // no GPU: nothing confirmed
  ad.gpus = {testing::gpu("NVIDIA H200", 141, 9, 0), testing::gpu("NVIDIA GeForce RTX 4090", 24, 8, 9)};
  claims.add({"p", "NVIDIA H200", true, 1});
  EXPECT_FALSE(claims.verified("p", ad));
  claims.add({"p", "NVIDIA GeForce RTX 4090", true, 2});
  EXPECT_TRUE(claims.verified("p", ad));
  EXPECT_FALSE(claims.verified("q", ad));
}

}  // namespace
}  // namespace yonder::mesh
