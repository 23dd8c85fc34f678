// The consumer's side of metering (jobs/metering/receipts_consumer.h, real:
// its SQLite receipt and job stores, its credits and verifications) over
// the in-memory network, in the simulation's time, against a provider
// whose receipt service is a stand-in that signs with the provider's real
// key whatever the test makes it claim (SimReceiptProvider: a TEST DOUBLE
// of jobs/metering/receipts_provider.h, so the provider can lie). An honest
// receipt is countersigned and the countersignature reaches the provider; a
// claim well past what the consumer saw is disputed, recorded against the
// provider and never countersigned; a receipt signed by someone else, or
// for a job this node never submitted there, is refused; a receipt the
// provider could not deliver while cut off is fetched by the next sweep.
// Each for several seeds (the read splits, the keys, the job's length).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "jobs/consumer/consumer_jobs.h"
#include "jobs/metering/credits.h"
#include "jobs/metering/receipts_consumer.h"
#include "jobs/metering/verifications.h"
#include "jobs/receipts/receipt_store.h"
#include "mesh/core/receipt.h"
#include "sim/sim_peers.h"
#include "support/manual_loop_timers.h"

namespace yonder::sim {
namespace {

using namespace std::chrono_literals;
using jobs::receipts::ReceiptState;

constexpr uint64_t kSeeds[] = {1, 2, 3, 17, 4242};

int64_t ms_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Serves receipt.get, receipt.pending and receipt.countersign on the
// provider node's link with the receipts the test hands it.
class SimReceiptProvider {
 public:
  explicit SimReceiptProvider(SimNode& node) {
    auto& link = node.peers->service();
    link.add_method("receipt.get", [this](const PublicKeyBytes&, const nlohmann::json& p, link::RpcReply reply) {
      auto it = held_.find(p.value("job_id", ""));
      if (it == held_.end()) return reply(make_error(ErrorCode::kNotFound, "no receipt for that job"));
      reply(nlohmann::json{{"receipt", it->second}});
    });
    link.add_method("receipt.pending", [this](const PublicKeyBytes&, const nlohmann::json&, link::RpcReply reply) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& [job, text] : held_) {
        if (countersigned.count(job) == 0) all.push_back(text);
      }
      reply(nlohmann::json{{"receipts", all}});
    });
    link.add_method("receipt.countersign",
                    [this](const PublicKeyBytes&, const nlohmann::json& p, link::RpcReply reply) {
                      countersigned[p.value("job_id", "")] = p.value("receipt", "");
                      reply(nlohmann::json::object());
                    });
  }
  void hold(const mesh::Receipt& r) { held_[r.job_id] = mesh::encode_receipt(r); }
  std::map<std::string, std::string> countersigned;  // by job id: what came back

 private:
  std::map<std::string, std::string> held_;
};

struct Metering {
  // `sweep_every`: credits.fetch_interval_s (0: no sweep timer).
  explicit Metering(uint64_t seed, std::chrono::seconds sweep_every = std::chrono::seconds(0)) : clock(std::chrono::system_clock::now()), net(seed, &clock), rng(seed) {
    consumer = &net.add_node("consumer");
    provider = &net.add_node("provider");
    stranger = &net.add_node("stranger");  // paired with nobody
    Scope run_only;
    if (!net.pair(*consumer, *provider, run_only).ok()) std::abort();
    served = std::make_unique<SimReceiptProvider>(*provider);
    auto js = jobs::consumer::ConsumerJobStore::open(consumer->db);
    auto rs = jobs::receipts::ReceiptStore::open(consumer->db);
    auto vs = jobs::metering::Verifications::open(consumer->db, consumer->identity);
    if (!js || !rs || !vs) std::abort();
    job_store = std::shared_ptr<jobs::consumer::ConsumerJobStore>(std::move(*js));
    receipt_store = std::move(*rs);
    verifications = std::move(*vs);
    credits = std::make_unique<jobs::metering::Credits>(consumer->key(), mesh::CreditParams{}, *receipt_store, false);
    receipts = std::make_unique<jobs::metering::ReceiptsConsumer>(net.io, net.io.get_executor(), clock,
                                                                  *consumer->peers, consumer->identity, job_store,
                                                                  *receipt_store, *credits);
    receipts->set_verifications(verifications.get());
    receipts->set_sweep_interval(sweep_every);
    if (!receipts->start()) std::abort();
    net.settle();
  }
  ~Metering() {
    receipts.reset();
    net.stop();
  }

  // A job this node submitted to the provider: running a second after its
  // submit, ended `run` later with `exit_code`, as the views it saw said.
  struct Seen {
    std::string job_id;
    int64_t start_ms, end_ms;
  };
  Seen run_job(const std::string& job_id, std::chrono::milliseconds run, int exit_code) {
    jobs::consumer::ConsumerJob job;
    job.job_id = job_id;
    job.provider_id = provider->id();
    job.state = "pending";
    job.spec = {{"request", {{"image", "debian:12"}, {"gpus", 1}}}, {"provider_name", "provider"}};
    job.created_at = std::chrono::duration_cast<std::chrono::seconds>(clock.now().time_since_epoch()).count();
    if (!job_store->save(job)) std::abort();
    clock.advance(1s);
    Seen seen{job_id, ms_of(clock.now()), 0};
    if (!job_store->update_from_view({{"job_id", job_id}, {"state", "running"}}, seen.start_ms)) std::abort();
    clock.advance(run);
    seen.end_ms = ms_of(clock.now());
    if (!job_store->update_from_view({{"job_id", job_id}, {"state", "exited"}, {"exit_code", exit_code}},
                                     seen.end_ms)) {
      std::abort();
    }
    clock.advance(200ms);
    return seen;
  }
  // The receipt an honest provider signs for what was seen.
  mesh::Receipt honest(const Seen& s, int exit_code) const {
    mesh::Receipt r;
    r.job_id = s.job_id;
    r.consumer = consumer->key();
    r.gpu_model = "NVIDIA GeForce RTX 4090";
    r.gpu_seconds = static_cast<uint64_t>((s.end_ms - s.start_ms) / 1000);
    r.start_ms = s.start_ms;
    r.end_ms = s.end_ms;
    r.exit_status = exit_code;
    r.output_hash = std::string(64, 'a');
    mesh::sign_receipt_as_provider(r, provider->identity);
    return r;
  }
  std::optional<jobs::receipts::StoredReceipt> stored(const std::string& job_id) {
    net.settle();
    auto row = receipt_store->get(PeerId(provider->id()), JobId(job_id));
    if (!row) std::abort();
    return *row;
  }
  void job_ended(const std::string& job_id) {
    receipts->job_ended(PeerId(provider->id()), JobId(job_id));
    net.settle();
  }

  testing::ManualLoopTimers clock;  // before the network, which counts by it
  SimNet net;
  std::mt19937_64 rng;
  SimNode* consumer = nullptr;
  SimNode* provider = nullptr;
  SimNode* stranger = nullptr;
  std::unique_ptr<SimReceiptProvider> served;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> job_store;
  std::unique_ptr<jobs::receipts::ReceiptStore> receipt_store;
  std::unique_ptr<jobs::metering::Verifications> verifications;
  std::unique_ptr<jobs::metering::Credits> credits;
  std::unique_ptr<jobs::metering::ReceiptsConsumer> receipts;
};

TEST(ReceiptsSim, AnHonestReceiptIsCountersignedAndTheProviderGetsItBack) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Metering m(seed);
    auto seen = m.run_job("job-1", std::chrono::seconds(30 + m.rng() % 600), 0);
    m.served->hold(m.honest(seen, 0));
    m.job_ended("job-1");
    auto row = m.stored("job-1");
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, ReceiptState::kCountersigned) << row->problem;
    ASSERT_EQ(m.served->countersigned.count("job-1"), 1u) << "the countersignature went back to the provider";
    auto back = mesh::decode_receipt(m.served->countersigned["job-1"]);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_TRUE(mesh::verify_receipt(*back).ok()) << "signed by both";
    EXPECT_EQ(back->gpu_seconds, m.honest(seen, 0).gpu_seconds);
  }
}

TEST(ReceiptsSim, AnInflatedClaimIsDisputedRecordedAgainstTheProviderAndNotCountersigned) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Metering m(seed);
    auto seen = m.run_job("job-2", std::chrono::seconds(60 + m.rng() % 600), 0);
    auto inflated = m.honest(seen, 0);
    inflated.gpu_seconds *= 10;  // ten times what the consumer saw room for
    mesh::sign_receipt_as_provider(inflated, m.provider->identity);
    m.served->hold(inflated);
    m.job_ended("job-2");
    auto row = m.stored("job-2");
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, ReceiptState::kDisputed);
    EXPECT_EQ(m.served->countersigned.count("job-2"), 0u) << "never countersigned";
    auto checks = m.verifications->list(m.provider->id());
    ASSERT_TRUE(checks.ok());
    ASSERT_EQ(checks->size(), 1u);
    EXPECT_EQ((*checks)[0].outcome, mesh::CheckOutcome::kDisputed);
    EXPECT_EQ((*checks)[0].subject, "job-2");
  }
}

TEST(ReceiptsSim, AReceiptSignedBySomeoneElseOrForAnotherJobIsRefused) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Metering m(seed);
    auto seen = m.run_job("job-3", 90s, 0);
    auto forged = m.honest(seen, 0);
    mesh::sign_receipt_as_provider(forged, m.stranger->identity);  // not the provider's key
    m.served->hold(forged);
    m.job_ended("job-3");
    auto row = m.stored("job-3");
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, ReceiptState::kRefused);
    EXPECT_FALSE(row->problem.empty());
    EXPECT_EQ(m.served->countersigned.count("job-3"), 0u);

    // A receipt for a job this node never submitted there, offered in a
    // sweep beside the receipt of a job that still lacks one (the sweep asks
    // only providers of such jobs).
    auto later = m.run_job("job-5", 20s, 0);
    m.served->hold(m.honest(later, 0));
    auto other = m.honest(seen, 0);
    other.job_id = "job-never-submitted";
    mesh::sign_receipt_as_provider(other, m.provider->identity);
    m.served->hold(other);
    bool swept = false;
    m.receipts->sweep([&] { swept = true; });
    m.net.run_until([&] { return swept; });
    ASSERT_TRUE(swept);
    auto refused = m.stored("job-never-submitted");
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->state, ReceiptState::kRefused);
    EXPECT_EQ(m.served->countersigned.count("job-never-submitted"), 0u);
    EXPECT_EQ(m.stored("job-5")->state, ReceiptState::kCountersigned) << "the sweep took the honest one";
    auto checks = m.verifications->list(m.provider->id());
    ASSERT_TRUE(checks.ok());
    EXPECT_TRUE(checks->empty()) << "a refusal is not held against the provider: it may not be its receipt";
  }
}

TEST(ReceiptsSim, AReceiptMissedWhileTheProviderWasCutOffComesWithTheNextSweep) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Metering m(seed, 300s);
    auto seen = m.run_job("job-4", 45s, 3);
    m.served->hold(m.honest(seen, 3));
    m.net.cut(*m.consumer, *m.provider);
    m.job_ended("job-4");
    EXPECT_FALSE(m.stored("job-4").has_value()) << "nothing to fetch while cut off";
    ASSERT_TRUE(m.net.connect(*m.consumer, *m.provider).ok());
    m.net.settle();
    EXPECT_FALSE(m.stored("job-4").has_value()) << "not before the sweep";
    // The sweep's own timer, every credits.fetch_interval_s of simulated time.
    for (int i = 0; i < 31; ++i) {
      m.clock.advance(10s);
      m.net.settle();
    }
    auto row = m.stored("job-4");
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->state, ReceiptState::kCountersigned) << row->problem;
    EXPECT_EQ(m.served->countersigned.count("job-4"), 1u);
  }
}

}  // namespace
}  // namespace yonder::sim
