// Metering glue (mesh/metering.h): the receipt a job's end yields, the
// consumer's checks before countersigning, the factor table's config form,
// and the ledger's per-peer totals.
#include "mesh/metering.h"

#include <gtest/gtest.h>

#include "mesh/ledger.h"
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

TEST(Metering, TheConsumerAcceptsAnHonestReceiptAndCountersignsIt) {
  auto consumer = identity(1), provider = identity(2);
  Receipt r = receipt_for_job_end(sample_end(consumer));
  sign_receipt_as_provider(r, provider);
  ASSERT_TRUE(check_receipt_for_job(r, facts_for(r, consumer, provider)).ok());
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
  sign_receipt_as_provider(inflated, provider);  // signed, but more than 2 GPUs x 100 s
  refused(inflated, facts, "more than the 2 GPU(s)");
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
  auto exited_zero = facts;
  exited_zero.exit_code = 0;
  refused(good, exited_zero, "exit status 3");
  auto cpu_job = facts;
  cpu_job.gpus_requested = 0;
  refused(good, cpu_job, "more than the 0 GPU(s)");
  auto later = facts;
  later.submitted_ms = good.start_ms + kReceiptClockSkewMs + 1000;
  refused(good, later, "before the job was submitted");
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
