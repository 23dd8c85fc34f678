// Mesh jobs end to end (issue 10, fault tolerance): real yonderds over
// loopback links, jobs on the real dockerd (fake GPUs without the NVIDIA
// runtime). A job that counts and keeps its count in checkpoint/ loses its
// provider (SIGKILL) mid-run and finishes on the other one from its last
// synced checkpoint, with receipts on both sides for the attempt that
// finished; a consumer daemon restarted while a mesh job runs picks it up.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "store/database.h"
#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/read_file.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

// Counts to 8, a second a step, resuming from checkpoint/n; says where it
// started; leaves result.txt.
constexpr const char* kCounter =
    "n=0; if [ -f checkpoint/n ]; then n=$(cat checkpoint/n); fi; echo \"start $n\"; mkdir -p checkpoint; "
    "while [ $n -lt 8 ]; do n=$((n+1)); echo $n > checkpoint/n.tmp; mv checkpoint/n.tmp checkpoint/n; "
    "echo \"step $n\"; sleep 1; done; echo $n > result.txt; echo finished";

// The consumer notices a silent provider within 3 s and copies checkpoints every second.
constexpr const char* kConsumerConfig = "[mesh]\nprovider_timeout_s = 3\ncheckpoint_interval_s = 1\n";

class MeshJobs : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

Env provider_env() {
  return {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}, {"YONDER_GPU_INVENTORY", "fake:1"}};
}

void pair_for_mesh(const Node& consumer, const Node& provider) {
  consumer.pair_with(provider, {"--scope", "run,mesh,files", "--max-jobs", "4"});
}

// `yonder mesh jobs --all --json`'s only job, once `ready` says so (bounded: the
// daemon's supervisor works in the background).
json mesh_job_when(const Node& node, const std::function<bool(const json&)>& ready, const std::string& what) {
  json last;
  bool got = wait_until(
      [&] {
        auto r = node.yonder({"mesh", "jobs", "--all", "--json"});
        auto j = json::parse(r.out, nullptr, false);
        if (!j.is_object() || !j["jobs"].is_array() || j["jobs"].size() != 1) return false;
        last = j["jobs"][0];
        return ready(last);
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  if (!got) ADD_FAILURE() << "the mesh job never got " << what << "; last: " << last.dump();
  return last;
}

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
        return !found.is_null() && found["state"] == state;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  if (!got) {
    ADD_FAILURE() << "no " << state << " receipt of job " << job << " on " << node.home() << "; last: " << found.dump();
  }
  return found;
}

TEST_F(MeshJobs, AJobWhoseProviderIsKilledFinishesElsewhereFromItsCheckpoint) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), beta(dir, "beta", true, provider_env()),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  pair_for_mesh(laptop, beta);
  std::string work = dir / "work";
  ASSERT_EQ(run({"/bin/mkdir", "-p", work}).exit_code, 0);
  std::ofstream(work + "/input.txt") << "the job's input\n";

  BackgroundProcess cli({program_path("yonder"), "run", "--mesh", "--retries", "0", "--image", kImage, "--upload", work,
                         "--", "sh", "-c", kCounter},
                        laptop.env());
  // Running, and the consumer holds a checkpoint past the first steps.
  json m = mesh_job_when(
      laptop,
      [&](const json& j) {
        if (j["attempts"].empty() || j["attempts"][0]["state"] != "running") return false;
        std::string n =
            read_file(laptop.home() + "/mesh-jobs/" + j["mesh_job_id"].get<std::string>() + "/checkpoint/n");
        return !n.empty() && std::stoi(n) >= 2;
      },
      "a running attempt with a checkpoint at 2 or more");
  ASSERT_FALSE(m.is_null());
  std::string first_provider = m["attempts"][0]["provider_id"];
  Node& lost = first_provider == alpha.node_id() ? alpha : beta;
  Node& other = first_provider == alpha.node_id() ? beta : alpha;
  std::string other_name = &other == &alpha ? "alpha" : "beta";
  ::kill(lost.daemon().pid(), SIGKILL);
  lost.daemon().wait();

  RunResult r = cli.wait();
  ASSERT_EQ(r.exit_code, 0) << r.err << "\n"
                            << r.out << "\n--- " << other_name << ":\n"
                            << other.daemon().log() << "\n--- laptop:\n"
                            << laptop.daemon().log();
  EXPECT_NE(r.out.find("start 0"), std::string::npos) << r.out;
  // The second attempt resumed where the synced checkpoint was, not from 0.
  size_t second = r.out.find("start ", r.out.find("start 0") + 1);
  ASSERT_NE(second, std::string::npos) << r.out;
  int resumed_from = std::stoi(r.out.substr(second + 6));
  EXPECT_GE(resumed_from, 2) << r.out;
  EXPECT_NE(r.out.find("step 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finished"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("stopped answering for 3 s; requeued on " + other_name + " from checkpoint"), std::string::npos)
      << r.err;
  // The outputs came home from the attempt that finished.
  EXPECT_EQ(read_file(work + "/result.txt"), "8\n");

  json done = mesh_job_when(
      laptop, [](const json& j) { return j["state"] != "running"; }, "an end");
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  ASSERT_EQ(done["attempts"].size(), 2u) << done.dump();
  EXPECT_EQ(done["attempts"][0]["state"], "lost") << done.dump();
  EXPECT_EQ(done["attempts"][1]["state"], "exited") << done.dump();
  EXPECT_EQ(done["attempts"][1]["provider_id"], other.node_id()) << done.dump();
  EXPECT_EQ(done["result"]["exit_code"], 0) << done.dump();
  std::string job = done["result"]["job_id"];
  EXPECT_EQ(job, done["attempts"][1]["job_id"]);

  // Both sides keep the same fully signed receipt of the attempt that finished.
  json mine = receipt_of(laptop, job, "countersigned");
  json theirs = receipt_of(other, job, "countersigned");
  EXPECT_TRUE(mine.value("verified", false)) << mine.dump();
  EXPECT_TRUE(theirs.value("verified", false)) << theirs.dump();
  EXPECT_EQ(mine["receipt"], theirs["receipt"]);
  EXPECT_EQ(mine["exit_status"], 0);

  // The listing says it in words.
  auto table = laptop.yonder({"mesh", "jobs", "--all"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("succeeded"), std::string::npos) << table.out;
  auto ps = laptop.yonder({"ps", "--all"});
  EXPECT_NE(ps.out.find("mesh job " + done["mesh_job_id"].get<std::string>().substr(0, 12) + ": succeeded; attempts: "),
            std::string::npos)
      << ps.out;
  EXPECT_NE(ps.out.find(" on " + other_name + " (exited)"), std::string::npos) << ps.out;
}

TEST_F(MeshJobs, ARestartedConsumerPicksUpItsRunningMeshJob) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  auto d = laptop.yonder({"run", "--mesh", "--retries", "0", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "sleep 4; echo done"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_EQ(id.size(), 32u) << d.out;
  mesh_job_when(
      laptop, [](const json& j) { return !j["attempts"].empty() && j["attempts"][0]["state"] == "running"; },
      "a running attempt");

  laptop.restart();  // SIGTERM; the job runs on at alpha

  json done = mesh_job_when(
      laptop, [](const json& j) { return j["state"] != "running"; }, "an end");
  EXPECT_EQ(done["mesh_job_id"], id);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["attempts"].size(), 1u) << done.dump();
  EXPECT_EQ(done["result"]["exit_code"], 0) << done.dump();
  auto logs = laptop.yonder({"logs", done["result"]["job_id"].get<std::string>()});
  EXPECT_NE(logs.out.find("done"), std::string::npos) << logs.out << logs.err;
}

TEST_F(MeshJobs, AFailedRunIsRetriedElsewhereAndItsExitCodeIsTheAnswer) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), beta(dir, "beta", true, provider_env()),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  pair_for_mesh(laptop, beta);

  // No retries: the job's own code, one attempt.
  auto r = laptop.yonder(
      {"run", "--mesh", "--retries", "0", "--image", kImage, "--no-upload", "--", "sh", "-c", "echo failing; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.out.find("failing"), std::string::npos) << r.out;

  // Fails the first time (after leaving a mark in checkpoint/), succeeds on the retry, which starts from it.
  r = laptop.yonder({"run", "--mesh", "--retries", "1", "--image", kImage, "--no-upload", "--", "sh", "-c",
                     "if [ -f checkpoint/seen ]; then echo second try; exit 0; fi; mkdir -p checkpoint; "
                     "touch checkpoint/seen; sleep 3; exit 5"});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("second try"), std::string::npos) << r.out;
  // Whichever provider ran it first, the retry went to the other one, with the checkpoint.
  bool alpha_first = r.err.find("attempt 1 on alpha ended") != std::string::npos;
  EXPECT_NE(r.err.find(std::string("ended (exited with code 5); retrying on ") + (alpha_first ? "beta" : "alpha") +
                       " from checkpoint"),
            std::string::npos)
      << r.err;
  auto all = laptop.yonder_json({"mesh", "jobs", "--all"});
  ASSERT_EQ(all["jobs"].size(), 2u) << all.dump();
  json retried;  // the job with a retry (not by position: same-second jobs list in id order)
  for (const auto& j : all["jobs"]) {
    if (j["spec"].value("retries", 0) == 1) retried = j;
  }
  ASSERT_TRUE(retried.is_object()) << all.dump();
  ASSERT_EQ(retried["attempts"].size(), 2u) << retried.dump();
  EXPECT_EQ(retried["attempts"][0]["exit_code"], 5) << retried.dump();
  EXPECT_NE(retried["attempts"][0]["provider_id"], retried["attempts"][1]["provider_id"]) << retried.dump();
  EXPECT_EQ(retried["state"], "succeeded") << retried.dump();
}

// What to look at when a replica test fails: the consumer's mesh jobs and its log.
std::string story(const Node& laptop) {
  return "\nmesh jobs: " + laptop.yonder({"mesh", "jobs", "--all", "--json"}).out;
}

// The provider's cgroup CPU quota: 100000 on a provider whose jobs get one
// CPU, 200000 on the "liar" (jobs.default_cpus = 2): a job whose answer
// depends on where it ran, as a provider that cheats would make it.
constexpr const char* kAnswer =
    "cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null | head -1 > answer.txt; "
    "echo computed";

Env labelled(const std::string& labels) {
  Env e = provider_env();
  e["YONDER_MESH_LABELS"] = labels;
  return e;
}

// The replica outcomes `node` recorded for `subject`, as "provider_id=outcome" lines, sorted.
std::vector<std::string> verifications_of(const Node& node, const std::string& subject) {
  std::vector<std::string> out;
  auto db = store::Database::open(node.home() + "/state.db");
  EXPECT_TRUE(db.ok());
  if (!db.ok()) return out;
  auto st = db->prepare(
      "SELECT provider_id || '=' || outcome FROM verifications WHERE kind = 'replica' AND "
      "subject = ?1 ORDER BY 1");
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return out;
  EXPECT_TRUE(st->bind(1, subject).ok());
  for (;;) {
    auto row = st->step();
    if (!row.ok() || !*row) break;
    out.push_back(st->column_text(0));
  }
  return out;
}

TEST_F(MeshJobs, TwoReplicasAgreeAndTheOutputComesHome) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), beta(dir, "beta", true, provider_env()),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  pair_for_mesh(laptop, beta);
  std::string work = dir / "work";
  ASSERT_EQ(run({"/bin/mkdir", "-p", work}).exit_code, 0);

  auto r = laptop.yonder(
      {"run", "--mesh", "--replicas", "2", "--image", kImage, "--upload", work, "--", "sh", "-c", kAnswer});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out << story(laptop);
  EXPECT_NE(r.out.find("computed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("quorum: 2 of 2 replicas agree"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(work + "/answer.txt"), "100000\n");

  json m = mesh_job_when(
      laptop, [](const json& j) { return j["state"] != "running"; }, "an end");
  EXPECT_EQ(m["state"], "succeeded") << m.dump();
  const json& q = m["result"]["quorum"];
  EXPECT_TRUE(q.value("decided", false)) << m.dump();
  ASSERT_EQ(q["replicas"].size(), 2u) << m.dump();
  EXPECT_EQ(q["replicas"][0]["hash"], q["replicas"][1]["hash"]) << m.dump();
  EXPECT_NE(q["replicas"][0]["provider_id"], q["replicas"][1]["provider_id"]) << m.dump();
  // Each replica's outputs are kept apart on the consumer.
  std::string id = m["mesh_job_id"];
  EXPECT_EQ(read_file(laptop.home() + "/mesh-jobs/" + id + "/replica-1/answer.txt"), "100000\n");
  EXPECT_EQ(read_file(laptop.home() + "/mesh-jobs/" + id + "/replica-2/answer.txt"), "100000\n");
  std::vector<std::string> expected = {alpha.node_id() + "=agreed", beta.node_id() + "=agreed"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(verifications_of(laptop, id), expected);
}

TEST_F(MeshJobs, ALyingProviderIsOutvotedByTwoAndLeavesTwoUndecided) {
  TempDir dir;
  Node alpha(dir, "alpha", true, labelled("pair=mixed")), beta(dir, "beta", true, labelled("")),
      liar(dir, "liar", true, labelled("pair=mixed"), "default_cpus = 2\n"),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  for (const Node* p : {&alpha, &beta, &liar}) pair_for_mesh(laptop, *p);

  // Three replicas: the two honest providers outvote the liar.
  auto r = laptop.yonder({"run", "--mesh", "--replicas", "3", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          std::string(kAnswer) + "; cat answer.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out << story(laptop);
  EXPECT_NE(r.out.find("100000"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("quorum: 2 of 3 replicas agree"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("on liar: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(outvoted)"), std::string::npos) << r.err;
  json m = mesh_job_when(
      laptop, [](const json& j) { return j["state"] != "running"; }, "an end");
  std::string id = m["mesh_job_id"];
  std::vector<std::string> expected = {alpha.node_id() + "=agreed", beta.node_id() + "=agreed",
                                       liar.node_id() + "=outvoted"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(verifications_of(laptop, id), expected);
  EXPECT_NE(m["result"]["provider_id"], liar.node_id()) << m.dump();

  // Two replicas, one on the liar (only alpha and the liar have the label):
  // one against one is no majority; nothing is accepted, nobody outvoted.
  r = laptop.yonder({"run", "--mesh", "--replicas", "2", "--label", "pair=mixed", "--image", kImage, "--no-upload",
                     "--", "sh", "-c", kAnswer});
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("no quorum: 1 of the 2 replicas agree"), std::string::npos) << r.err;
  auto all = laptop.yonder_json({"mesh", "jobs", "--all"});
  ASSERT_EQ(all["jobs"].size(), 2u) << all.dump();
  // (Not by position: two jobs made in the same second list in id order.)
  json undecided;
  for (const auto& j : all["jobs"]) {
    if (j["spec"].value("replicas", 0) == 2) undecided = j;
  }
  ASSERT_TRUE(undecided.is_object()) << all.dump();
  EXPECT_EQ(undecided["state"], "failed") << undecided.dump();
  EXPECT_FALSE(undecided["result"]["quorum"].value("decided", true)) << undecided.dump();
  EXPECT_TRUE(verifications_of(laptop, undecided["mesh_job_id"]).empty());

  // A validator judges the replicas instead of their hashes: the liar's answer is rejected and outvoted.
  r = laptop.yonder({"run", "--mesh", "--replicas", "3", "--validator", "grep -qx 100000 answer.txt", "--image", kImage,
                     "--no-upload", "--", "sh", "-c", std::string(kAnswer) + "; date +%N"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out << story(laptop);
  EXPECT_NE(r.err.find("quorum: 2 of 3 replicas agree"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", rejected (outvoted)"), std::string::npos) << r.err;
  all = laptop.yonder_json({"mesh", "jobs", "--all"});
  std::string validated;
  for (const auto& j : all["jobs"]) {
    if (j["spec"].contains("validator")) validated = j["mesh_job_id"];
  }
  ASSERT_FALSE(validated.empty()) << all.dump();
  EXPECT_EQ(verifications_of(laptop, validated), expected);
}

}  // namespace
}  // namespace yonder::testing
