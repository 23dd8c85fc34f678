// Verification outcomes and opinions (mesh/core/verification.h): round trips,
// signatures, bounds, and what a fetcher keeps of a peer's opinions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mesh/core/benchmark.h"
#include "mesh/core/reputation.h"
#include "mesh/core/verification.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

using testing::identity;
using testing::receipt;
constexpr UnixMs kVerificationNow = 1'800'000'000'000;

Verification sample(const Identity& reporter, const Identity& provider, CheckKind kind = CheckKind::kKnownAnswer,
                    CheckOutcome outcome = CheckOutcome::kPassed, std::string subject = "bench-1") {
  Verification v;
  v.provider = provider.public_key();
  v.kind = kind;
  v.subject = std::move(subject);
  v.outcome = outcome;
  v.at_ms = kVerificationNow;
  v.details = R"({"gpu_model":"NVIDIA GeForce RTX 4090","seconds":0.5})";
  sign_verification(v, reporter);
  return v;
}

TEST(Verification, RoundTripsAndVerifies) {
  auto me = identity(1), p = identity(2);
  Verification v = sample(me, p);
  auto back = decode_verification(encode_verification(v));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, v);
  EXPECT_TRUE(verify_verification(*back).ok());
  // Every signed field is covered.
  Verification t = v;
  t.outcome = CheckOutcome::kFailed;
  EXPECT_EQ(verify_verification(t).error().code(), ErrorCode::kPermissionDenied);
  t = v;
  t.details = "{}";
  EXPECT_FALSE(verify_verification(t).ok());
  t = v;
  t.provider = identity(3).public_key();
  EXPECT_FALSE(verify_verification(t).ok());
  // About oneself: refused.
  EXPECT_FALSE(verify_verification(sample(me, me)).ok());
}

TEST(Verification, DecoderRefusesWhatDoesNotFit) {
  auto me = identity(1), p = identity(2);
  std::string good = encode_verification(sample(me, p));
  auto with = [&](const char* key, nlohmann::json value) {
    auto j = nlohmann::json::parse(good);
    j[key] = std::move(value);
    return decode_verification(j.dump()).ok();
  };
  EXPECT_FALSE(with("v", 2));
  EXPECT_FALSE(with("kind", "vibes"));
  EXPECT_FALSE(with("outcome", "agreed"));  // not for known_answer
  EXPECT_FALSE(with("subject", "a b"));
  EXPECT_FALSE(with("subject", std::string(65, 'a')));
  EXPECT_FALSE(with("details", std::string(kMaxVerificationDetailsBytes + 1, 'x')));
  EXPECT_FALSE(with("at_ms", -1));
  EXPECT_FALSE(decode_verification(std::string(kMaxVerificationBytes + 1, ' ')).ok());
  EXPECT_FALSE(decode_verification("[]").ok());
  // Unknown fields are ignored.
  EXPECT_TRUE(with("extra", 1));
}

TEST(Opinions, KeepOnlyWhatTheSenderSignedOrWasPartyTo) {
  auto me = identity(1), p = identity(2), other = identity(3);
  Opinions o;
  o.receipts = {receipt(p, me, "j1", 60, kVerificationNow), receipt(other, identity(4), "j2", 60, kVerificationNow)};
  Receipt forged = receipt(me, p, "j3", 60, kVerificationNow);
  forged.gpu_seconds = 999;
  o.receipts.push_back(forged);
  o.verifications = {sample(me, p), sample(other, p),
                     sample(me, other, CheckKind::kReplica, CheckOutcome::kOutvoted, "mj-1")};
  o.verifications[2].outcome = CheckOutcome::kAgreed;  // tampered after signing
  auto text = encode_opinions(o);
  auto back = decode_opinions(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->receipts, o.receipts);
  EXPECT_EQ(back->verifications, o.verifications);
  Opinions kept = verified_opinions(std::move(*back), me.public_key());
  ASSERT_EQ(kept.receipts.size(), 1u);  // j2: not a party; j3: forged
  EXPECT_EQ(kept.receipts[0].job_id, "j1");
  ASSERT_EQ(kept.verifications.size(), 1u);  // other's: not the sender; the tampered one
  EXPECT_EQ(kept.verifications[0].subject, "bench-1");
  EXPECT_EQ(kept.dropped, 4u);
}

TEST(Opinions, StayWithinTheirBoundsAndDropBadItems) {
  auto me = identity(1), p = identity(2);
  Opinions o;
  for (int i = 0; i < 300; ++i) {
    o.receipts.push_back(receipt(p, me, "j" + std::to_string(i), 60, kVerificationNow));
    o.verifications.push_back(sample(me, p, CheckKind::kKnownAnswer, CheckOutcome::kPassed, "b" + std::to_string(i)));
  }
  std::string text = encode_opinions(o);
  EXPECT_LE(text.size(), kMaxOpinionsBytes);
  auto back = decode_opinions(text);
  ASSERT_TRUE(back.ok());
  // The byte budget binds first; neither list crowds out the other.
  EXPECT_GT(back->receipts.size(), 64u);
  EXPECT_LE(back->receipts.size(), kMaxOpinionItems);
  EXPECT_GT(back->verifications.size(), 64u);
  EXPECT_LE(back->verifications.size(), kMaxOpinionItems);
  EXPECT_EQ(back->receipts.front().job_id, "j0");  // the first given (newest) kept
  // A bad item is dropped; a bad envelope is refused.
  auto j = nlohmann::json::parse(encode_opinions(Opinions{}));
  j["receipts"] = {"not a receipt", 7};
  auto some = decode_opinions(j.dump());
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->dropped, 2u);
  j["receipts"] = nlohmann::json::array();
  for (size_t i = 0; i <= kMaxOpinionItems; ++i) j["receipts"].push_back("x");
  EXPECT_FALSE(decode_opinions(j.dump()).ok());
  EXPECT_FALSE(decode_opinions(R"({"v":2})").ok());
  EXPECT_FALSE(decode_opinions(std::string(kMaxOpinionsBytes + 1, ' ')).ok());
}

TEST(Reputation, KnownAnswerBenchmarksCountBothWays) {
  auto me = identity(1), honest = identity(2), wrong = identity(3);
  // Two providers nobody has receipts from: a pass gives standing, a failure none.
  std::vector<VerificationOutcome> outcomes = {{me.public_key(), honest.public_key(), true, true},
                                               {me.public_key(), wrong.public_key(), false, true}};
  auto t = compute_trust({}, outcomes, {me.public_key()}, TrustParams{});
  EXPECT_GT(t.normalised(honest.public_key()), 0.0);
  EXPECT_EQ(t.normalised(wrong.public_key()), 0.0);
  // A failure costs what receipts earned; an agreed replica adds nothing by itself.
  std::vector<Receipt> rs = {receipt(honest, me, "a", 600, kVerificationNow), receipt(wrong, me, "b", 600, kVerificationNow)};
  auto before = compute_trust(rs, {}, {me.public_key()}, TrustParams{});
  EXPECT_NEAR(before.global[honest.public_key()], before.global[wrong.public_key()], 1e-12);
  auto after =
      compute_trust(rs, {{me.public_key(), wrong.public_key(), false, true}}, {me.public_key()}, TrustParams{});
  EXPECT_EQ(after.normalised(wrong.public_key()), 0.0);
  auto agreed =
      compute_trust(rs, {{me.public_key(), wrong.public_key(), true, false}}, {me.public_key()}, TrustParams{});
  EXPECT_EQ(agreed.global, before.global);
}

// Writes seed inputs for fuzz/verification_fuzz.cpp when asked
// (YONDER_WRITE_CORPUS=DIR), so the corpus holds validly signed items.
TEST(Verification, WritesFuzzCorpusWhenAsked) {
  const char* dir = std::getenv("YONDER_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set YONDER_WRITE_CORPUS=DIR to write the fuzz seeds";
  auto me = identity(1), p = identity(2);
  std::ofstream(std::string(dir) + "/known_answer.json") << encode_verification(sample(me, p));
  Opinions o;
  o.receipts = {receipt(p, me, "j1", 60, kVerificationNow)};
  o.verifications = {sample(me, p), sample(me, p, CheckKind::kReplica, CheckOutcome::kOutvoted, "mj-1")};
  std::ofstream(std::string(dir) + "/opinions.json") << encode_opinions(o);
}

}  // namespace
}  // namespace yonder::mesh

namespace yonder::mesh {
namespace {

TEST(Benchmark, CommandCarriesTheSpecAndTheOutputParses) {
  BenchmarkSpec spec;
  spec.n = 8;
  spec.seed = 12345;
  std::string cmd = benchmark_command(spec);
  EXPECT_NE(cmd.find("n = 8;"), std::string::npos);
  EXPECT_NE(cmd.find("x = 12345;"), std::string::npos);
  EXPECT_NE(cmd.find("/proc/uptime"), std::string::npos);
  // Deterministic, and the seed matters.
  uint32_t h = benchmark_expected(spec);
  EXPECT_EQ(h, benchmark_expected(spec));
  EXPECT_LT(h, kBenchmarkModulus);
  BenchmarkSpec other = spec;
  other.seed = 12346;
  EXPECT_NE(benchmark_expected(other), h);
  // 1x1: one product of the first two draws.
  BenchmarkSpec one;
  one.n = 1;
  one.seed = 1;
  uint64_t x1 = 48271, x2 = (x1 * 48271) % 2147483647;
  EXPECT_EQ(benchmark_expected(one), ((x1 % 65521) * (x2 % 65521)) % 65521);

  auto out = parse_benchmark_output("noise\nyonder-benchmark n=8 seed=12345 checksum=" + std::to_string(h) +
                                    "\nyonder-benchmark-time start=100.25 end=101.50\n");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->n, 8u);
  EXPECT_EQ(out->seed, 12345u);
  EXPECT_EQ(out->checksum, h);
  ASSERT_TRUE(out->seconds.has_value());
  EXPECT_DOUBLE_EQ(*out->seconds, 1.25);
  EXPECT_FALSE(parse_benchmark_output("yonder-benchmark n=8 seed=x checksum=1\n").has_value());
  EXPECT_FALSE(parse_benchmark_output("nothing here").has_value());
  auto untimed = parse_benchmark_output("yonder-benchmark n=8 seed=1 checksum=3");
  ASSERT_TRUE(untimed.has_value());
  EXPECT_FALSE(untimed->seconds.has_value());
}

}  // namespace
}  // namespace yonder::mesh
