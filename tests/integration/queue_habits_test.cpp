// What a Slurm user reaches for, through the real `yonder` against a
// provider and a consumer (real yonderd each, paired over loopback TLS,
// jobs on the real dockerd): job dependencies (--after, --after-ok, like
// sbatch --dependency=afterany/afterok) and hold/release (sbatch --hold,
// scontrol hold/release).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

class QueueHabits : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_DOCKER_OR_SKIP();
    studio_ = std::make_unique<Node>(dir_, "studio", true);
    laptop_ = std::make_unique<Node>(dir_, "laptop", false);
    laptop_->pair_with(*studio_, {"--max-jobs", "4"});
  }
  // Submits `script` detached with `flags`; returns the job id.
  std::string detached(const std::string& script, std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"run", "--on", "studio", "--image", kImage, "--no-upload", "-d"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    auto d = laptop_->yonder(args);
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return d.out.substr(0, d.out.find('\n'));
  }
  json inspect(const std::string& id) {
    auto r = laptop_->yonder({"inspect", id});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  Node& laptop() { return *laptop_; }

  TempDir dir_;
  std::unique_ptr<Node> studio_, laptop_;
};

TEST_F(QueueHabits, AnAfterOkJobWaitsForItsJobAndStartsOnceItSucceeded) {
  std::string first = detached("sleep 3; exit 0");
  // A prefix names the job, as everywhere.
  std::string next = detached("echo next", {"--after-ok", first.substr(0, 8)});
  auto v = inspect(next);
  EXPECT_EQ(v["state"], "pending") << v.dump();
  EXPECT_EQ(v.value("waiting_for", ""), "waiting for job " + first + " to succeed (--after-ok)") << v.dump();
  EXPECT_EQ(v["after_ok"], json({first})) << v.dump();
  auto w = laptop().yonder({"wait", next});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(inspect(first)["state"], "exited");
  auto logs = laptop().yonder({"logs", next});
  EXPECT_EQ(logs.out, "next\n");
}

TEST_F(QueueHabits, AnAfterOkJobOfAFailedJobNeverStartsAndSaysWhy) {
  std::string first = detached("exit 3");
  std::string next = detached("echo never", {"--after-ok", first});
  auto w = laptop().yonder({"wait", next});
  EXPECT_NE(w.exit_code, 0);
  auto v = inspect(next);
  EXPECT_EQ(v["state"], "failed") << v.dump();
  EXPECT_EQ(v["reason"], "dependency_failed") << v.dump();
  EXPECT_NE(v.value("message", "").find("did not succeed (exited with 3)"), std::string::npos) << v.dump();
}

TEST_F(QueueHabits, AnAfterJobRunsOnceItsJobEndedHowever) {
  std::string first = detached("sleep 1; exit 4");
  std::string next = detached("echo after", {"--after", first});
  EXPECT_EQ(laptop().yonder({"wait", next}).exit_code, 0);
  EXPECT_EQ(inspect(first)["exit_code"], 4);
}

TEST_F(QueueHabits, ADependencyMustBeOneOfYourJobsHere) {
  auto r = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--after",
                            "0123456789abcdef", "--", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("0123456789abcdef"), std::string::npos) << r.err;
}

TEST_F(QueueHabits, AHeldJobWaitsUntilReleasedAndOnlyAWaitingJobCanBeHeld) {
  std::string held = detached("echo released", {"--hold"});
  auto v = inspect(held);
  EXPECT_EQ(v["state"], "pending") << v.dump();
  EXPECT_EQ(v["held"], true) << v.dump();
  EXPECT_EQ(v.value("waiting_for", ""), "held: it starts once released (yonder release " + held + ")") << v.dump();
  auto released = laptop().yonder({"release", held.substr(0, 8)});
  ASSERT_EQ(released.exit_code, 0) << released.err;
  EXPECT_EQ(released.out, held + " released\n");
  EXPECT_EQ(laptop().yonder({"wait", held}).exit_code, 0);
  auto again = laptop().yonder({"hold", held});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("only a job still waiting in the queue can be held"), std::string::npos) << again.err;
}

TEST_F(QueueHabits, HoldKeepsAQueuedJobFromStartingAfterItsDependencyEnds) {
  std::string first = detached("sleep 2");
  std::string next = detached("echo next", {"--after", first});
  ASSERT_EQ(laptop().yonder({"hold", next}).exit_code, 0);
  EXPECT_EQ(laptop().yonder({"wait", first}).exit_code, 0);
  // The dependency is met; the hold still stands (the provider's queue
  // has been looked at again since: `first` ended).
  ASSERT_TRUE(wait_until([&] { return inspect(next).value("waiting_for", "").rfind("held", 0) == 0; }));
  EXPECT_EQ(inspect(next)["state"], "pending");
  ASSERT_EQ(laptop().yonder({"release", next}).exit_code, 0);
  EXPECT_EQ(laptop().yonder({"wait", next}).exit_code, 0);
}

}  // namespace
}  // namespace yonder::testing
