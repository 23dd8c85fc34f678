// Metering glue (mesh/core/metering.h): the receipt a job's end yields, the
// consumer's checks before countersigning, the factor table's config form,
// and the ledger's per-peer totals.
#include "mesh/core/metering.h"

#include <gtest/gtest.h>

#include "mesh/core/ledger.h"
#include "mesh/core/reputation.h"
#include "mesh/core/verification.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

using testing::identity;

const std::string kHash(64, 'a');

JobEnd sample_end(const Identity& consumer) {
  JobEnd e;
  e.job_id = "0123456789abcdef";
  e.consumer = consumer.public_key();
  e.gpu_model = "NVIDIA GeForce RTX 4090";
  e.devices = 2;
  e.start_s = 1'800'000'000;
  e.end_s = 1'800'000'100;
  e.exit_code = 3;
  e.output_hash = kHash;
  return e;
}

ConsumerJobFacts facts_for(const Receipt& r, const Identity& consumer, const Identity& provider) {
  ConsumerJobFacts f;
  f.job_id = r.job_id;
  f.self = consumer.public_key();
  f.provider = provider.public_key();
  f.gpus_requested = 2;
  f.exit_code = 3;
  f.submitted_ms = r.start_ms - 1000;
  f.now_ms = r.end_ms + 1000;
  return f;
}

TEST(Metering, AJobEndBecomesAReceiptInWholeDeviceSeconds) {
  auto consumer = identity(1), provider = identity(2);
  Receipt r = receipt_for_job_end(sample_end(consumer));
  EXPECT_EQ(r.gpu_seconds, 200u);  // 2 devices x 100 s
  EXPECT_EQ(r.start_ms, 1'800'000'000'000);
  EXPECT_EQ(r.end_ms, 1'800'000'100'000);
  EXPECT_EQ(r.exit_status, 3);
  sign_receipt_as_provider(r, provider);
  auto back = decode_receipt(encode_receipt(r));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, r);

  JobEnd never = sample_end(consumer);
  never.start_s = 0;  // stopped while queued
  never.exit_code.reset();
  Receipt q = receipt_for_job_end(never);
  EXPECT_EQ(q.gpu_seconds, 0u);
  EXPECT_EQ(q.start_ms, q.end_ms);
  EXPECT_EQ(q.exit_status, -1);

  JobEnd cpu = sample_end(consumer);
  cpu.devices = 0;
  EXPECT_EQ(receipt_for_job_end(cpu).gpu_model, kNoGpuModel);
  EXPECT_EQ(receipt_for_job_end(cpu).gpu_seconds, 0u);
}

// A share of one GPU (jobs/provider/gpu_shares.h) meters its part of the
// device's time, rounded up, and the consumer bounds it as one GPU.
TEST(Metering, AShareOfAGpuCountsItsPartOfTheDevicesTime) {
  auto consumer = identity(1), provider = identity(2);
  JobEnd half = sample_end(consumer);
  half.devices = 1;
  half.share_permille = 500;
  Receipt r = receipt_for_job_end(half);
  EXPECT_EQ(r.gpu_seconds, 50u);  // half of 1 device x 100 s
  EXPECT_EQ(r.gpu_model, "NVIDIA GeForce RTX 4090");
  half.share_permille = 333;
  EXPECT_EQ(receipt_for_job_end(half).gpu_seconds, 34u);  // 33.3, rounded up
  half.share_permille = 5000;                             // never more than the device
  EXPECT_EQ(receipt_for_job_end(half).gpu_seconds, 100u);
  half.share_permille = 250;
  r = receipt_for_job_end(half);
  sign_receipt_as_provider(r, provider);
  ConsumerJobFacts f = facts_for(r, consumer, provider);
  f.gpus_requested = 1;  // what the consumer's side makes of a share
  ASSERT_TRUE(check_receipt_for_job(r, f).ok());
  EXPECT_EQ(judge_receipt(r, f).kind, MeteringVerdict::Kind::kAsIs);
}

TEST(Metering, TheConsumerAcceptsAnHonestReceiptAndCountersignsIt) {
  auto consumer = identity(1), provider = identity(2);
  Receipt r = receipt_for_job_end(sample_end(consumer));
  sign_receipt_as_provider(r, provider);
  ASSERT_TRUE(check_receipt_for_job(r, facts_for(r, consumer, provider)).ok());
  EXPECT_EQ(judge_receipt(r, facts_for(r, consumer, provider)).kind, MeteringVerdict::Kind::kAsIs);
  ASSERT_TRUE(countersign_receipt(r, consumer).ok());
  EXPECT_TRUE(verify_receipt(r).ok());
}

TEST(Metering, TheConsumerRefusesReceiptsThatDoNotMatchTheJob) {
  auto consumer = identity(1), provider = identity(2), stranger = identity(3);
  Receipt good = receipt_for_job_end(sample_end(consumer));
  sign_receipt_as_provider(good, provider);
  auto facts = facts_for(good, consumer, provider);
  auto refused = [&](Receipt r, const ConsumerJobFacts& f, const std::string& why) {
    auto st = check_receipt_for_job(r, f);
    ASSERT_FALSE(st.ok()) << why;
    EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
    EXPECT_NE(st.error().message().find(why), std::string::npos) << st.error().message();
  };
  Receipt inflated = good;
  inflated.gpu_seconds = 400;  // not re-signed
  refused(inflated, facts, "signature does not verify");
  Receipt other_job = good;
  other_job.job_id = "ffffffffffffffff";
  sign_receipt_as_provider(other_job, provider);
  refused(other_job, facts, "it is for job");
  Receipt by_stranger = good;
  sign_receipt_as_provider(by_stranger, stranger);
  refused(by_stranger, facts, "not the one the job was sent to");
  auto not_me = facts;
  not_me.self = stranger.public_key();
  refused(good, not_me, "another consumer");
  auto cpu_job = facts;
  cpu_job.gpus_requested = 0;
  refused(good, cpu_job, "for a job that asked for no GPU");
}

// What the consumer saw of a 4 s job on 4 GPUs that exited 3: submitted at
// t, running at t+1 s, ended at t+5 s.
constexpr UnixMs kSubmit = 1'800'000'000'000;
ConsumerJobFacts seen_four_seconds(const Identity& consumer, const Identity& provider, const std::string& job) {
  ConsumerJobFacts f;
  f.job_id = job;
  f.self = consumer.public_key();
  f.provider = provider.public_key();
  f.gpus_requested = 4;
  f.exit_code = 3;
  f.submitted_ms = kSubmit;
  f.first_seen_running_ms = kSubmit + 1000;
  f.seen_ended_ms = kSubmit + 5000;
  f.now_ms = kSubmit + 6000;
  return f;
}

Receipt claimed(const Identity& consumer, const Identity& provider, const std::string& job, int64_t start_s,
                int64_t end_s, int exit_code) {
  JobEnd e;
  e.job_id = job;
  e.consumer = consumer.public_key();
  e.gpu_model = "NVIDIA GeForce RTX 4090";
  e.devices = 4;
  e.start_s = start_s;
  e.end_s = end_s;
  e.exit_code = exit_code;
  e.output_hash = kHash;
  Receipt r = receipt_for_job_end(e);
  sign_receipt_as_provider(r, provider);
  return r;
}

TEST(Metering, AnHonestReceiptIsCountersignedAsIs) {
  auto consumer = identity(1), provider = identity(2);
  // The provider's clock runs 2 minutes ahead: only durations are compared.
  int64_t start = kSubmit / 1000 + 120 + 1;
  Receipt r = claimed(consumer, provider, "job-honest", start, start + 4, 3);
  auto f = seen_four_seconds(consumer, provider, "job-honest");
  ASSERT_TRUE(check_receipt_for_job(r, f).ok());
  auto v = judge_receipt(r, f);
  EXPECT_EQ(v.kind, MeteringVerdict::Kind::kAsIs) << v.reason;
  EXPECT_EQ(v.observed_gpu_seconds, 4u * 6);  // 5 s seen + 1 s of rounding
}

TEST(Metering, TheForgedReceiptIsRefusedAndCounted) {
  auto consumer = identity(1), provider = identity(2), honest = identity(3);
  auto f = seen_four_seconds(consumer, provider, "job-forged");
  // 2,380 GPU-seconds: start and end each pushed to the edge of the old
  // +-5 min window around submit and now, and exit 0 for the 3 it was.
  int64_t start = (kSubmit - kReceiptClockSkewMs) / 1000 + 5;
  Receipt forged = claimed(consumer, provider, "job-forged", start, start + 595, 0);
  ASSERT_EQ(forged.gpu_seconds, 2380u);
  ASSERT_TRUE(check_receipt_for_job(forged, f).ok());  // it is this job's receipt, signed by its provider
  auto v = judge_receipt(forged, f);
  ASSERT_EQ(v.kind, MeteringVerdict::Kind::kDisagree);
  EXPECT_NE(v.reason.find("exited 0; this node saw it exit 3"), std::string::npos) << v.reason;

  // Not followed (no exit code seen): the time alone is disputed.
  auto unfollowed = f;
  unfollowed.exit_code.reset();
  v = judge_receipt(forged, unfollowed);
  ASSERT_EQ(v.kind, MeteringVerdict::Kind::kDisagree);
  EXPECT_NE(v.reason.find("claims 2380 GPU-seconds"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("(24)"), std::string::npos) << v.reason;
  // Seen ending only now (the consumer was away): still bounded by its own submit.
  auto away = unfollowed;
  away.seen_ended_ms = 0;
  away.now_ms = kSubmit + 60'000;
  EXPECT_EQ(judge_receipt(forged, away).kind, MeteringVerdict::Kind::kDisagree);

  // Counted: the dispute is a signed verification against the provider,
  // and costs it the standing its honest receipts earned.
  Verification d;
  d.provider = provider.public_key();
  d.kind = CheckKind::kReceipt;
  d.subject = "job-forged";
  d.outcome = CheckOutcome::kDisputed;
  d.at_ms = f.now_ms;
  sign_verification(d, consumer);
  auto back = decode_verification(encode_verification(d));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_TRUE(verify_verification(*back).ok());
  EXPECT_FALSE(outcome_good(back->outcome));
  Verification wrong = d;
  wrong.outcome = CheckOutcome::kPassed;  // a receipt check is only ever a dispute
  sign_verification(wrong, consumer);
  EXPECT_FALSE(verify_verification(wrong).ok());

  std::vector<Receipt> receipts = {testing::receipt(provider, consumer, "p1", 100, kSubmit),
                                   testing::receipt(honest, consumer, "h1", 100, kSubmit)};
  std::vector<VerificationOutcome> outcomes = {{consumer.public_key(), provider.public_key(), false, false}};
  auto trust = compute_trust(receipts, outcomes, {consumer.public_key()}, TrustParams{});
  EXPECT_DOUBLE_EQ(trust.normalised(provider.public_key()), 0.0);
  EXPECT_GT(trust.normalised(honest.public_key()), 0.5);
}

TEST(Metering, ASmallOverclaimIsCountersignedAtWhatTheConsumerSaw) {
  auto consumer = identity(1), provider = identity(2);
  auto f = seen_four_seconds(consumer, provider, "job-rounded");
  int64_t start = kSubmit / 1000;
  Receipt r = claimed(consumer, provider, "job-rounded", start, start + 10, 3);  // 40 > 24, within the slack
  auto v = judge_receipt(r, f);
  ASSERT_EQ(v.kind, MeteringVerdict::Kind::kClamped) << v.reason;
  EXPECT_EQ(v.view.gpu_seconds, 24u);
  EXPECT_EQ(v.view.start_ms, f.submitted_ms);
  EXPECT_EQ(v.view.end_ms, f.seen_ended_ms);

  Receipt signed_r = r;
  signed_r.consumer_view = v.view;
  ASSERT_TRUE(countersign_receipt(signed_r, consumer).ok());
  ASSERT_TRUE(verify_receipt(signed_r).ok());
  EXPECT_EQ(credited_gpu_seconds(signed_r), 24u);
  auto back = decode_receipt(encode_receipt(signed_r));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, signed_r);
  EXPECT_TRUE(receipt_provider_signature_valid(*back));  // the provider's claim is untouched

  // The view is the consumer's word: changed, it no longer verifies...
  Receipt raised = signed_r;
  raised.consumer_view->gpu_seconds = 40;
  EXPECT_FALSE(verify_receipt(raised).ok());
  Receipt dropped = signed_r;
  dropped.consumer_view.reset();
  EXPECT_FALSE(verify_receipt(dropped).ok());
  // ... and can never claim more than the provider did.
  Receipt more = r;
  more.consumer_view = ConsumerView{41, f.submitted_ms, f.seen_ended_ms};
  EXPECT_FALSE(countersign_receipt(more, consumer).ok());

  // Credits count what both vouch for.
  CreditParams params;
  Ledger at_consumer(consumer.public_key(), params);
  ASSERT_TRUE(at_consumer.add(signed_r).ok());
  EXPECT_DOUBLE_EQ(at_consumer.totals().at(provider.public_key()).given, 24.0);
}

TEST(Metering, TimesOutsideWhatTheConsumerSawAreDisputed) {
  auto consumer = identity(1), provider = identity(2);
  auto f = seen_four_seconds(consumer, provider, "job-times");
  int64_t before = (kSubmit - kReceiptClockSkewMs) / 1000 - 10;
  EXPECT_EQ(judge_receipt(claimed(consumer, provider, "job-times", before, before + 4, 3), f).kind,
            MeteringVerdict::Kind::kDisagree);
  int64_t after = (f.now_ms + kReceiptClockSkewMs) / 1000 + 10;
  EXPECT_EQ(judge_receipt(claimed(consumer, provider, "job-times", after - 4, after, 3), f).kind,
            MeteringVerdict::Kind::kDisagree);
}

TEST(Metering, FactorTablesParseFromTheConfigForm) {
  auto t = parse_model_factors("NVIDIA GeForce RTX 4090=1.0, Tesla T4 = 0.25,,NVIDIA H100 80GB HBM3=3");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->size(), 3u);
  EXPECT_DOUBLE_EQ(t->at("Tesla T4"), 0.25);
  EXPECT_DOUBLE_EQ(t->at("NVIDIA H100 80GB HBM3"), 3.0);
  EXPECT_TRUE(parse_model_factors("").ok());
  EXPECT_FALSE(parse_model_factors("T4").ok());
  EXPECT_FALSE(parse_model_factors("T4=fast").ok());
  EXPECT_FALSE(parse_model_factors("T4=-1").ok());
  EXPECT_FALSE(parse_factor("1e9", "x").ok());
  EXPECT_DOUBLE_EQ(*parse_factor(" 0.5 ", "x"), 0.5);
}

TEST(Metering, LedgerTotalsMirrorOnBothSides) {
  auto consumer = identity(1), provider = identity(2);
  Receipt r = receipt_for_job_end(sample_end(consumer));
  sign_receipt_as_provider(r, provider);
  ASSERT_TRUE(countersign_receipt(r, consumer).ok());
  CreditParams params;
  Ledger at_provider(provider.public_key(), params), at_consumer(consumer.public_key(), params);
  ASSERT_TRUE(at_provider.add(r).ok());
  ASSERT_TRUE(at_consumer.add(r).ok());
  auto p = at_provider.totals().at(consumer.public_key());
  auto c = at_consumer.totals().at(provider.public_key());
  EXPECT_DOUBLE_EQ(p.taken, 200.0);  // RTX 4090: factor 1.0
  EXPECT_DOUBLE_EQ(c.given, 200.0);
  EXPECT_EQ(p.receipts, 1);
  EXPECT_EQ(c.receipts, 1);
  EXPECT_DOUBLE_EQ(at_provider.net(consumer.public_key()), -at_consumer.net(provider.public_key()));
}

}  // namespace
}  // namespace yonder::mesh
