// Metering end to end (issue 10): a provider and a consumer as real
// yonderds over loopback links, jobs on the real dockerd (fake GPUs without
// the NVIDIA runtime). Every finished job leaves the same fully signed
// receipt on both sides; credits mirror; tampered receipts are refused with
// the reason; a consumer that was down when its job ended still gets its
// receipt.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/database.h"
#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

class Metering : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

// The receipt of `job` in `node`'s `yonder receipts --verify --json`, once it
// is in `state` ("" any) (the other side's message may still be on its way:
// bounded wait).
json receipt_of(const Node& node, const std::string& job, const std::string& state) {
  json found;
  bool got = wait_until(
      [&] {
        auto r = node.yonder({"receipts", "--verify", "--json"});
        auto j = json::parse(r.out, nullptr, false);
        if (j.is_object()) {
          for (const auto& v : j["receipts"]) {
            if (v["job_id"] == job) found = v;
          }
        }
        return !found.is_null() && (state.empty() || found["state"] == state);
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  if (!got) {
    ADD_FAILURE() << "no " << state << " receipt of job " << job << " on " << node.home() << "; last: " << found.dump();
  }
  return found;
}

json peer_credits(const Node& node, const std::string& peer_id) {
  auto credits = node.yonder_json({"credits"});
  for (const auto& p : credits["peers"]) {
    if (p["peer_id"] == peer_id) return p;
  }
  return nullptr;
}

std::string run_detached(const Node& consumer, std::vector<std::string> command, bool gpu = true) {
  std::vector<std::string> args = {"run", "--on", "studio", "--image", kImage, "--no-upload", "-d"};
  if (gpu) args.insert(args.end(), {"--gpus", "1"});
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  auto d = consumer.yonder(args);
  EXPECT_EQ(d.exit_code, 0) << d.err;
  return d.out.substr(0, d.out.find('\n'));
}

TEST_F(Metering, BothSidesKeepTheSameFullySignedReceiptAndCreditsMirror) {
  TempDir dir;
  Node studio(dir, "studio", true, {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}}), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--gpus", "1", "--", "sh", "-c",
                          "echo metered; sleep 1; exit 3"});
  ASSERT_EQ(r.exit_code, 3) << r.err;
  std::string job = laptop.yonder_json({"ps", "--all"})["jobs"][0]["job_id"];

  json mine = receipt_of(laptop, job, "countersigned");
  json theirs = receipt_of(studio, job, "countersigned");
  EXPECT_TRUE(mine.value("verified", false)) << mine.dump();
  EXPECT_TRUE(theirs.value("verified", false)) << theirs.dump();
  EXPECT_EQ(mine["receipt"], theirs["receipt"]);  // the very same bytes, both signatures
  EXPECT_EQ(mine["role"], "consumer");
  EXPECT_EQ(theirs["role"], "provider");
  EXPECT_EQ(mine["provider_id"], studio.node_id());
  EXPECT_EQ(mine["consumer_id"], laptop.node_id());
  EXPECT_EQ(mine["exit_status"], 3);
  EXPECT_EQ(mine["gpu_model"], "FAKE GPU");
  uint64_t gpu_s = mine["gpu_seconds"];
  EXPECT_GE(gpu_s, 1u);
  EXPECT_LE(gpu_s, 30u);
  std::string hash = mine["output_hash"];
  EXPECT_EQ(hash.size(), 64u);
  EXPECT_NE(hash, std::string(64, '0'));

  // Credits mirror: what the laptop was given is what the studio gave.
  json at_laptop = peer_credits(laptop, studio.node_id());
  json at_studio = peer_credits(studio, laptop.node_id());
  ASSERT_FALSE(at_laptop.is_null());
  ASSERT_FALSE(at_studio.is_null());
  EXPECT_EQ(at_laptop["receipts"], 1);
  EXPECT_EQ(at_studio["receipts"], 1);
  EXPECT_DOUBLE_EQ(at_laptop["given"].get<double>(), 0.5 * static_cast<double>(gpu_s));  // FAKE GPU: default factor
  EXPECT_DOUBLE_EQ(at_laptop["given"].get<double>(), at_studio["taken"].get<double>());
  EXPECT_DOUBLE_EQ(at_laptop["taken"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(at_studio["given"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(at_laptop["balance"].get<double>() - 3600, 3600 - at_studio["balance"].get<double>());
  EXPECT_EQ(at_laptop["name"], "studio");

  // A CPU-only job: a receipt naming no GPU and no GPU-seconds.
  std::string cpu = run_detached(laptop, {"true"}, false);
  EXPECT_EQ(laptop.yonder({"logs", "-f", cpu}).exit_code, 0);
  json cpu_receipt = receipt_of(laptop, cpu, "countersigned");
  EXPECT_EQ(cpu_receipt["gpu_model"], "none");
  EXPECT_EQ(cpu_receipt["gpu_seconds"], 0);
  EXPECT_EQ(receipt_of(studio, cpu, "countersigned")["receipt"], cpu_receipt["receipt"]);
}

TEST_F(Metering, TamperedReceiptsAreRefusedWithTheReason) {
  TempDir dir;
  // The laptop fetches only when asked, so the provider's row can be edited first.
  Node studio(dir, "studio", true, {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}}),
      laptop(dir, "laptop", false, {}, "[credits]\nfetch_interval_s = 0\n");
  laptop.pair_with(studio, {});
  std::string job = run_detached(laptop, {"sh", "-c", "sleep 1"});
  EXPECT_EQ(laptop.yonder({"logs", "-f", job}).exit_code, 0);
  json good = receipt_of(laptop, job, "countersigned");
  receipt_of(studio, job, "countersigned");

  // 1. A modified receipt fed through the RPC: more GPU-seconds than signed.
  json inflated = good["receipt"];
  inflated["gpu_seconds"] = inflated["gpu_seconds"].get<uint64_t>() + 3600;
  auto rpc = laptop.yonder(
      {"call", "studio", "receipt.countersign", json{{"job_id", job}, {"receipt", inflated.dump()}}.dump()});
  EXPECT_NE(rpc.exit_code, 0);
  EXPECT_NE(rpc.err.find("is not the one this provider signed"), std::string::npos) << rpc.err;
  // ... and one whose countersignature is not the consumer's.
  json forged = good["receipt"];
  forged["consumer_sig"] = forged["provider_sig"];
  rpc = laptop.yonder(
      {"call", "studio", "receipt.countersign", json{{"job_id", job}, {"receipt", forged.dump()}}.dump()});
  EXPECT_NE(rpc.exit_code, 0);
  EXPECT_NE(rpc.err.find("countersignature is missing or does not verify"), std::string::npos) << rpc.err;

  // 2. The provider's stored receipt edited before the consumer fetched it.
  std::string second = run_detached(laptop, {"sh", "-c", "exit 0"});
  json signed_row = receipt_of(studio, second, "signed");  // the consumer has not asked yet (-d, nobody follows)
  {
    auto db = store::Database::open(studio.home() + "/state.db");
    ASSERT_TRUE(db.ok());
    json edited = signed_row["receipt"];
    edited["gpu_seconds"] = 1;  // the job ran for at most a second or two: plausible, but not what was signed
    edited["exit_status"] = 0;
    edited["gpu_model"] = "NVIDIA H100 80GB HBM3";
    auto st = db->prepare("UPDATE receipts SET receipt_json = ?1 WHERE job_id = ?2");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->bind(1, edited.dump()).ok());
    ASSERT_TRUE(st->bind(2, second).ok());
    ASSERT_TRUE(st->step().ok());
  }
  auto credits = laptop.yonder_json({"credits"});  // fetches what is missing
  json refused = receipt_of(laptop, second, "refused");
  EXPECT_FALSE(refused.value("verified", true));
  EXPECT_NE(refused.value("problem", "").find("the provider's signature does not verify"), std::string::npos)
      << refused.dump();
  ASSERT_EQ(credits["peers"].size(), 1u) << credits.dump();
  EXPECT_EQ(credits["peers"][0]["receipts"], 1);  // only the first job counts
  auto verify = laptop.yonder({"receipts", "--verify"});
  EXPECT_EQ(verify.exit_code, 7) << verify.out << verify.err;

  // 3. The consumer's own countersigned row edited: no longer verifies, not counted.
  {
    auto db = store::Database::open(laptop.home() + "/state.db");
    ASSERT_TRUE(db.ok());
    json edited = good["receipt"];
    edited["gpu_seconds"] = edited["gpu_seconds"].get<uint64_t>() * 100;
    auto st = db->prepare("UPDATE receipts SET receipt_json = ?1 WHERE job_id = ?2");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->bind(1, edited.dump()).ok());
    ASSERT_TRUE(st->bind(2, job).ok());
    ASSERT_TRUE(st->step().ok());
  }
  json broken = receipt_of(laptop, job, "countersigned");
  EXPECT_FALSE(broken.value("verified", true));
  EXPECT_NE(broken.value("verify_problem", "").find("signature does not verify"), std::string::npos) << broken.dump();
  EXPECT_TRUE(peer_credits(laptop, studio.node_id()).is_null());  // nothing left that counts
  // The provider's books are its own: still one receipt from the laptop.
  EXPECT_EQ(peer_credits(studio, laptop.node_id())["receipts"], 1);
}

// The forgery: the provider edits its own database so a short job
// that exited 3 reads as ten minutes that exited 0, and signs the receipt
// anew. The consumer saw the job submitted seconds ago: it does not
// countersign, stores the receipt as disputed with the reason, records the
// dispute against the provider, and counts nothing.
TEST_F(Metering, TheForgedReceiptIsRefusedAndCounted) {
  TempDir dir;
  Node studio(dir, "studio", true, {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}}),
      laptop(dir, "laptop", false, {}, "[credits]\nfetch_interval_s = 0\n");
  laptop.pair_with(studio, {});
  std::string job = run_detached(laptop, {"sh", "-c", "sleep 1; exit 3"});
  receipt_of(studio, job, "signed");  // ended and signed; the consumer has not asked
  studio.crash_and_restart([&] {
    auto db = store::Database::open(studio.home() + "/state.db");
    ASSERT_TRUE(db.ok());
    auto st = db->prepare(
        "UPDATE jobs SET exit_code = 0, result_json = json_set(result_json, '$.started_at', "
        "json_extract(result_json, '$.finished_at') - 595) WHERE job_id = ?1");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(st->bind(1, job).ok());
    ASSERT_TRUE(st->step().ok());
    auto del = db->prepare("DELETE FROM receipts WHERE job_id = ?1");
    ASSERT_TRUE(del.ok());
    ASSERT_TRUE(del->bind(1, job).ok());
    ASSERT_TRUE(del->step().ok());
  });
  auto credits = laptop.yonder_json({"credits"});  // fetches what is missing: signed anew from the edited record
  json forged = receipt_of(studio, job, "signed");
  EXPECT_EQ(forged["gpu_seconds"], 595) << forged.dump();
  EXPECT_EQ(forged["exit_status"], 0) << forged.dump();
  json disputed = receipt_of(laptop, job, "disputed");
  ASSERT_FALSE(disputed.is_null()) << "laptop:\n" << laptop.daemon().log() << "\nstudio:\n" << studio.daemon().log();
  EXPECT_FALSE(disputed.value("verified", true));
  EXPECT_NE(disputed.value("problem", "").find("claims 595 GPU-seconds"), std::string::npos) << disputed.dump();
  EXPECT_FALSE(disputed["receipt"].contains("consumer_sig")) << disputed.dump();
  for (const auto& p : credits["peers"]) EXPECT_EQ(p.value("receipts", 0), 0) << credits.dump();
  EXPECT_EQ(laptop.yonder({"receipts", "--verify"}).exit_code, 7);
  // Counted against the provider: a signed verification, handed to peers as evidence.
  auto db = store::Database::open(laptop.home() + "/state.db");
  ASSERT_TRUE(db.ok());
  auto st = db->prepare(
      "SELECT count(*) FROM verifications WHERE kind = 'receipt' AND outcome = 'disputed' AND subject = ?1 AND "
      "provider_id = ?2");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->bind(1, job).ok());
  ASSERT_TRUE(st->bind(2, studio.node_id()).ok());
  ASSERT_TRUE(st->step().ok());
  EXPECT_EQ(st->column_int64(0), 1);
  // Asked again, the same receipt is not disputed twice.
  laptop.yonder_json({"credits"});
  auto again = db->prepare("SELECT count(*) FROM verifications WHERE subject = ?1");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->bind(1, job).ok());
  ASSERT_TRUE(again->step().ok());
  EXPECT_EQ(again->column_int64(0), 1);
}

TEST_F(Metering, AConsumerDownWhenItsJobEndedStillGetsItsReceipt) {
  TempDir dir;
  Node studio(dir, "studio", true, {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}}), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  std::string job = run_detached(laptop, {"sh", "-c", "sleep 2"});
  laptop.crash_and_restart();  // SIGKILL while the job runs: nothing fetched, nothing said
  // The restarted laptop's first sweep may fetch it by itself before `credits` asks.
  receipt_of(studio, job, "");
  json credits = laptop.yonder_json({"credits"});
  ASSERT_EQ(credits["peers"].size(), 1u) << credits.dump();
  EXPECT_EQ(credits["peers"][0]["receipts"], 1);
  json mine = receipt_of(laptop, job, "countersigned");
  EXPECT_TRUE(mine.value("verified", false)) << mine.dump();
  EXPECT_EQ(receipt_of(studio, job, "countersigned")["receipt"], mine["receipt"]);
}

// The receipt's output hash covers the files the job created or changed in
// its workspace, not only what it printed: equal logs with other files
// differ, an equal run is equal, the uploaded files as they came count for
// nothing and a changed one counts.
TEST_F(Metering, TheOutputHashCoversTheFilesTheJobWrote) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  std::filesystem::create_directories(dir / "project");
  std::ofstream(dir / "project/input.txt") << "uploaded\n";
  auto hash_of = [&](const std::string& script) {
    auto d = laptop.yonder(
        {"run", "--on", "studio", "--image", kImage, "--upload", dir / "project", "-d", "--", "sh", "-c", script});
    EXPECT_EQ(d.exit_code, 0) << d.err;
    std::string job = d.out.substr(0, d.out.find('\n'));
    auto logs = laptop.yonder({"logs", "-f", job});  // returns once the job has ended
    EXPECT_EQ(logs.out, "same\n") << logs.err;
    return receipt_of(laptop, job, "").value("output_hash", "");
  };
  std::string a = hash_of("echo same; echo A > out.txt");
  std::string b = hash_of("echo same; echo B > out.txt");
  std::string a_again = hash_of("echo same; echo A > out.txt; cat input.txt > /dev/null");
  std::string a_changed = hash_of("echo same; echo A > out.txt; echo edited > input.txt");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, a_again);
  EXPECT_NE(a, a_changed);
  EXPECT_NE(b, a_changed);
}

}  // namespace
}  // namespace yonder::testing
