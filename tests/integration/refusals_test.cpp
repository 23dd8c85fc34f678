// Requests the provider refuses, through the real CLI: each gets a message
// that says why, and each leaves an entry in the provider's audit log
// (`yonder audit --json`, parsed here).
//
//   not the owner:  a second consumer that learned a job's id (here: written
//                   into its own job list, as a modified client could) tries
//                   stop, logs, exec, cp out and cp in -> "no job ... of yours"
//   out of scope:   exec without the `exec` capability
//   over limits:    --memory above what the scope allows
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "jobs/consumer/consumer_jobs.h"
#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

class Refusals : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";

// The audit entry by `actor` for `action` whose refusal mentions `reason`
// (bounded wait: entries are written just after the reply).
json refusal(const Node& provider, const std::string& actor, const std::string& action, const std::string& reason) {
  json found = nullptr;
  wait_until(
      [&] {
        json audit = provider.yonder_json({"audit", "-n", "1000"});
        for (const auto& e : audit["entries"]) {
          if (e["actor"] == actor && e["action"] == action && e["detail"].is_object() &&
              e["detail"].value("refused", "").find(reason) != std::string::npos) {
            found = e;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  return found;
}

bool wait_running(const Node& node, const std::string& id) {
  return wait_until(
      [&] {
        auto ps = node.yonder_json({"ps"});
        for (const auto& j : ps["jobs"]) {
          if (j["job_id"] == id && j["state"] == "running") return true;
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
}

TEST_F(Refusals, EachRefusalIsExplainedAndAudited) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false), intruder(dir, "intruder", false),
      tablet(dir, "tablet", false);
  laptop.pair_with(studio, {"--scope", "run,exec,files", "--memory", "1G", "--max-jobs", "2"});
  intruder.pair_with(studio, {"--scope", "run,exec,files"});
  tablet.pair_with(studio, {"--scope", "run"});
  std::string studio_id = studio.yonder_json({"status"})["node_id"];
  std::string laptop_id = laptop.yonder_json({"status"})["node_id"];
  std::string intruder_id = intruder.yonder_json({"status"})["node_id"];
  std::string tablet_id = tablet.yonder_json({"status"})["node_id"];

  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "echo secret > mine.txt; sleep 60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_TRUE(wait_running(laptop, id));

  // The intruder's client claims the job as its own.
  {
    auto store = jobs::consumer::ConsumerJobStore::open(intruder.home() + "/state.db");
    ASSERT_TRUE(store.ok()) << store.error().to_string();
    jobs::consumer::ConsumerJob stolen;
    stolen.job_id = id;
    stolen.provider_id = studio_id;
    stolen.state = "running";
    ASSERT_TRUE((*store)->save(stolen).ok());
  }
  std::string dest = dir / "dest";
  std::filesystem::create_directories(dest);
  std::string local = dir / "payload.txt";
  std::ofstream(local) << "payload\n";
  std::string not_yours = "no job " + id + " of yours";
  struct Attempt {
    std::vector<std::string> args;
    std::string action;
  };
  std::vector<Attempt> attempts = {
      {{"stop", id}, "run.stop"},
      {{"logs", id}, "run.logs"},
      {{"exec", id, "--", "cat", "mine.txt"}, "exec.session"},
      {{"cp", id + ":mine.txt", dest}, "run.fetch"},
      {{"cp", local, id + ":"}, "files.put"},
  };
  for (const auto& a : attempts) {
    auto r = intruder.yonder(a.args);
    EXPECT_NE(r.exit_code, 0) << a.action;
    EXPECT_NE(r.err.find(not_yours), std::string::npos) << a.action << ": " << r.err;
    EXPECT_EQ(r.out.find("secret"), std::string::npos) << a.action;
    json entry = refusal(studio, intruder_id, a.action, not_yours);
    EXPECT_FALSE(entry.is_null()) << a.action;
    if (!entry.is_null()) {
      EXPECT_EQ(entry["subject"], id) << entry.dump();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dest + "/mine.txt"));

  // Out of scope: exec without `exec` (tablet's own job).
  auto t = tablet.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "60"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  std::string tablet_job = t.out.substr(0, t.out.find('\n'));
  ASSERT_TRUE(wait_running(tablet, tablet_job));
  auto exec = tablet.yonder({"exec", tablet_job, "--", "true"});
  EXPECT_EQ(exec.exit_code, 125) << exec.err;
  EXPECT_NE(exec.err.find("does not include \"exec\""), std::string::npos) << exec.err;
  EXPECT_FALSE(refusal(studio, tablet_id, "exec.session", "does not include \"exec\"").is_null());

  // Over limits: more memory than the scope allows.
  auto big = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--memory", "2G", "--", "true"});
  EXPECT_EQ(big.exit_code, 125) << big.err;
  EXPECT_NE(big.err.find("allows at most 1 GiB"), std::string::npos) << big.err;
  json over = refusal(studio, laptop_id, "run.submit", "of memory");
  ASSERT_FALSE(over.is_null());
  EXPECT_EQ(over["detail"]["code"], "permission_denied") << over.dump();
  EXPECT_EQ(over["detail"]["image"], kImage) << over.dump();

  // The owner was never disturbed, and the chain holds.
  auto mine = laptop.yonder({"exec", id, "--", "cat", "mine.txt"});
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(mine.out, "secret\n");
  EXPECT_TRUE(studio.yonder_json({"audit", "--verify"})["verify"]["ok"].get<bool>());
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
  EXPECT_EQ(tablet.yonder({"stop", tablet_job}).exit_code, 0);
}

}  // namespace
}  // namespace yonder::testing
