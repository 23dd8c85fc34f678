// Array jobs end to end (issue 12): real yonderds over loopback links, tasks
// on the real dockerd (fake GPUs without the NVIDIA runtime). An array of
// tasks spreads over two providers, each task's output comes home into
// out/<index>/ and the shared input is uploaded once per provider; an array
// file gives each task its line; and a 200-task array survives one
// provider killed midway and the consumer's daemon restarted midway, with
// every output home.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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
// A silent provider is noticed within 3 s.
constexpr const char* kConsumerConfig = "[mesh]\nprovider_timeout_s = 3\n";

class MeshArray : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

Env provider_env() { return {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}, {"YONDER_GPU_INVENTORY", "fake:2"}}; }

void pair_for_mesh(const Node& consumer, const Node& provider) {
  consumer.pair_with(provider, {"--scope", "run,mesh,files", "--max-jobs", "8"});
}

uint64_t done_of(const json& s) { return s["counts"].value("done", uint64_t{0}); }

// `yonder array status ID --json` once `ready` says so. The bound is on a
// stall, not on the whole wait: it fails when no task has finished for
// `stall` (a hang), however long a slow machine takes to get there while
// tasks keep finishing.
json status_when(const Node& node, const std::string& id, const std::function<bool(const json&)>& ready,
                 const std::string& what, std::chrono::seconds stall = std::chrono::seconds(180)) {
  json last;
  uint64_t done = 0;
  auto progressed = std::chrono::steady_clock::now();
  bool stalled = false;
  bool got = wait_until(
      [&] {
        auto r = node.yonder({"array", "status", id, "--json"});
        auto j = json::parse(r.out, nullptr, false);
        auto now = std::chrono::steady_clock::now();
        if (j.is_object()) {
          last = j;
          if (ready(last)) return true;
          if (done_of(last) > done) {
            done = done_of(last);
            progressed = now;
          }
        }
        stalled = now - progressed >= stall;
        return stalled;
      },
      std::chrono::hours(2), std::chrono::milliseconds(100));
  if (!got || stalled) {
    ADD_FAILURE() << "the array never got " << what << " (no task finished for " << stall.count() << " s); last: " << last.dump();
  }
  return last;
}

std::string make_input(const TempDir& dir) {
  std::string work = dir / "work";
  EXPECT_EQ(run({"/bin/mkdir", "-p", work}).exit_code, 0);
  std::ofstream(work + "/words.txt") << "alpha beta gamma\n";
  return work;
}

// Every upload a provider's audit log recorded: how many files it had to receive.
std::vector<uint64_t> uploads_sent(const Node& provider) {
  std::vector<uint64_t> sent;
  json audit = provider.yonder_json({"audit"});
  for (const auto& e : audit.value("entries", json::array())) {
    if (e.value("action", "") != "run.upload" || !e.contains("detail")) continue;
    const json& d = e["detail"];
    if (d.contains("sent_files") && d["sent_files"].is_number_unsigned()) sent.push_back(d["sent_files"].get<uint64_t>());
  }
  return sent;
}

TEST_F(MeshArray, TasksSpreadOverTheMeshAndEachOutputComesHome) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), beta(dir, "beta", true, provider_env()),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  pair_for_mesh(laptop, beta);
  std::string work = make_input(dir);
  auto r = laptop.yonder({"run", "--mesh", "--array", "0-11%4", "--image", kImage, "--upload", work, "--json", "--",
                          "sh", "-c", "wc -w < words.txt > count.txt; echo \"task $YONDER_ARRAY_INDEX of $YONDER_ARRAY_TASKS\" > who.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err << "\n--- laptop:\n" << laptop.daemon().log();
  json s = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_EQ(s["state"], "done");
  EXPECT_EQ(done_of(s), 12u);
  EXPECT_EQ(s["counts"]["failed"], 0);
  uint64_t shared = 0;
  for (const auto& p : s["providers"]) shared += p.value("done", uint64_t{0});
  EXPECT_EQ(shared, 12u) << s.dump();
  for (int i = 0; i < 12; ++i) {
    std::string out = work + "/out/" + std::to_string(i);
    EXPECT_EQ(read_file(out + "/who.txt"), "task " + std::to_string(i) + " of 12\n") << out;
    EXPECT_EQ(read_file(out + "/count.txt"), "3\n") << out;
    // Only what the task made comes home, not the input it was given.
    EXPECT_FALSE(std::ifstream(out + "/words.txt").good()) << out;
  }
  // The input went to each provider once; later tasks there sent nothing,
  // even those that started beside the first (the consumer's uploads of
  // one folder to one provider queue), and out/, filling meanwhile in the
  // uploaded folder, was never sent.
  size_t uploads = 0;
  for (const Node* p : {&alpha, &beta}) {
    auto sent = uploads_sent(*p);
    uploads += sent.size();
    uint64_t with_files = 0;
    for (uint64_t n : sent) with_files += n > 0 ? 1 : 0;
    EXPECT_LE(with_files, 1u) << p->home();
    for (uint64_t n : sent) EXPECT_LE(n, 1u) << "only words.txt is input";
  }
  EXPECT_GE(uploads, 12u) << "one upload per task in the providers' audit logs";
  auto list = laptop.yonder_json({"array", "list", "--all"});
  ASSERT_EQ(list["arrays"].size(), 1u);
  EXPECT_EQ(list["arrays"][0]["state"], "done");
}

// The daemon brings each task's outputs home under the same caps as `run`
// (outputs.max_files here 2), and past them only with the user's word.
TEST_F(MeshArray, NoOutputsLimitLiftsTheCapsForTheDaemonsOwnFetches) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()),
      laptop(dir, "laptop", false, {}, std::string(kConsumerConfig) + "[outputs]\nmax_files = 2\n");
  pair_for_mesh(laptop, alpha);
  std::string work = make_input(dir);
  auto r = laptop.yonder({"run", "--mesh", "--array", "0-1", "--image", kImage, "--upload", work,
                          "--no-outputs-limit", "--json", "--", "sh", "-c", "echo a > a.txt; echo b > b.txt; echo c > c.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err << "\n--- laptop:\n" << laptop.daemon().log();
  for (int i = 0; i < 2; ++i) {
    std::string out = work + "/out/" + std::to_string(i);
    EXPECT_EQ(read_file(out + "/c.txt"), "c\n") << out;
  }
}

TEST_F(MeshArray, AnArrayFileGivesEachTaskItsLineAndAFailingTaskIsNamed) {
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  std::string work = make_input(dir);
  std::ofstream(work + "/params.jsonl") << "{\"prompt\": \"one\"}\n{\"prompt\": \"two\"}\nfail\n";
  auto r = laptop.yonder({"run", "--mesh", "--array-file", work + "/params.jsonl", "--retries", "1", "--image", kImage,
                          "--upload", work, "--", "sh", "-c",
                          "[ \"$YONDER_ARRAY_PARAM\" = fail ] && exit 3; echo \"$YONDER_ARRAY_PARAM\" > param.txt"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("task 2 failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("yonder array retry"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(work + "/out/0/param.txt"), "{\"prompt\": \"one\"}\n");
  EXPECT_EQ(read_file(work + "/out/1/param.txt"), "{\"prompt\": \"two\"}\n");
  auto list = laptop.yonder_json({"array", "list", "--all"});
  ASSERT_EQ(list["arrays"].size(), 1u);
  std::string id = list["arrays"][0]["array_id"];
  json s = laptop.yonder_json({"array", "status", id});
  EXPECT_EQ(s["state"], "failed");
  EXPECT_EQ(s["counts"]["done"], 2);
  EXPECT_EQ(s["counts"]["failed"], 1);
  EXPECT_EQ(s["counts"]["retried"], 1) << "tried once more before it was given up: " << s.dump();
  ASSERT_EQ(s["failed"].size(), 1u);
  EXPECT_EQ(s["failed"][0]["task"], 2);
  // Its logs are kept on the provider: the job it last ran as is named.
  std::string job = s["failed"][0]["job_id"];
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(laptop.yonder({"logs", job}).exit_code, 0);
  // A bad range is refused before anything runs.
  auto bad = laptop.yonder({"run", "--mesh", "--array", "1-5", "--image", kImage, "--no-upload", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("indices start at 0"), std::string::npos) << bad.err;
}

// YONDER_MESH_ARRAY_TASKS makes the array smaller (sanitizer builds: 32);
// the provider dies a quarter in and the consumer restarts half way.
int task_count() {
  const char* v = std::getenv("YONDER_MESH_ARRAY_TASKS");
  int n = v ? std::atoi(v) : 0;
  return n >= 8 ? n : 200;
}

TEST_F(MeshArray, TwoHundredTasksSurviveALostProviderAndAConsumerRestart) {
  const int tasks = task_count();
  const uint64_t quarter = static_cast<uint64_t>(tasks / 4), half = static_cast<uint64_t>(tasks / 2);
  TempDir dir;
  Node alpha(dir, "alpha", true, provider_env()), beta(dir, "beta", true, provider_env()),
      laptop(dir, "laptop", false, {}, kConsumerConfig);
  pair_for_mesh(laptop, alpha);
  pair_for_mesh(laptop, beta);
  std::string work = make_input(dir);
  auto r = laptop.yonder({"run", "--mesh", "--array", "0-" + std::to_string(tasks - 1) + "%6", "--image", kImage, "--upload", work, "-d", "--",
                          "sh", "-c", "echo $((YONDER_ARRAY_INDEX * YONDER_ARRAY_INDEX)) > square.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_EQ(id.size(), 32u) << r.out;

  // A quarter in: one provider dies for good (SIGKILL, never back).
  status_when(laptop, id, [&](const json& s) { return done_of(s) >= quarter; }, "a quarter of the tasks done");
  ::kill(beta.daemon().pid(), SIGKILL);
  beta.daemon().wait();
  // Half way: the consumer's daemon restarts (the array is not tied to it).
  status_when(laptop, id, [&](const json& s) { return done_of(s) >= half; }, "half the tasks done");
  std::string first_log = laptop.daemon().log();  // the restart starts a new one
  laptop.restart();
  json s = status_when(laptop, id, [](const json& j) { return j.value("state", "") != "running"; }, "to its end");
  // What a failure shows first (CI keeps only the start of each): why.
  std::string why = "failed: " + s.value("failed", json::array()).dump().substr(0, 600) + " error: " + s.value("error", "") +
                    " fetch_errors: " + std::to_string(s.value("fetch_errors", uint64_t{0}));
  EXPECT_EQ(s["state"], "done") << why << "\n" << s.dump() << "\n--- laptop:\n" << laptop.daemon().log();
  EXPECT_EQ(done_of(s), static_cast<uint64_t>(tasks));
  int missing = 0;
  for (int i = 0; i < tasks; ++i) {
    std::string got = read_file(work + "/out/" + std::to_string(i) + "/square.txt");
    EXPECT_EQ(got, std::to_string(i * i) + "\n") << "task " << i << "; " << why;
    missing += got.empty() ? 1 : 0;
  }
  if (missing > 0) {
    // The providers' side of it: fetches that sent no files, and what their
    // logs say about workspaces (a dead provider's audit cannot be asked).
    std::string seen;
    std::istringstream consumer(first_log + laptop.daemon().log());
    for (std::string line; std::getline(consumer, line);) {
      if (line.find("\"warn") != std::string::npos && line.find("array") != std::string::npos) seen += line.substr(0, 300) + "\n";
    }
    for (Node* p : {&alpha, &beta}) {
      auto audit = json::parse(p->yonder({"audit", "--json"}).out, nullptr, false);
      if (audit.is_object()) {
        for (const auto& e : audit.value("entries", json::array())) {
          if (e.value("action", "") == "run.fetch" && e.contains("detail") && e["detail"].value("files", 1) == 0) {
            seen += "empty fetch on " + p->home() + ": " + e.dump() + "\n";
          }
        }
      }
      std::istringstream log(p->daemon().log());
      for (std::string line; std::getline(log, line);) {
        if (line.find("clean") != std::string::npos || line.find("mount") != std::string::npos ||
            line.find("fetch") != std::string::npos) {
          seen += line.substr(0, 300) + "\n";
        }
      }
    }
    ADD_FAILURE() << missing << " task(s) without output\n" << seen.substr(0, 6000) << s.dump() << "\n--- laptop:\n"
                  << laptop.daemon().log();
  }
}

}  // namespace
}  // namespace yonder::testing
