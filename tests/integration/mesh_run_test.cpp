// `yonder run --mesh` end to end (issue 10): real yonderds over loopback
// links, jobs on the real dockerd (fake GPUs without the NVIDIA runtime).
// Providers of different fake GPUs advertise signed capacity; a consumer
// sees both (`yonder mesh`), a job lands on the one that fits, an
// infeasible one gets the clear error, and two consumers asking at once for
// the only fitting GPU never both get it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

class MeshRun : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

Env provider_env(const std::string& inventory, const std::string& labels) {
  return {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}, {"YONDER_GPU_INVENTORY", inventory},
          {"YONDER_MESH_LABELS", labels}};
}

void pair_for_mesh(const Node& consumer, const Node& provider) {
  consumer.pair_with(provider, {"--scope", "run,mesh", "--max-jobs", "4"});
}

std::vector<std::string> mesh_run(std::vector<std::string> needs, std::vector<std::string> command) {
  std::vector<std::string> args = {"run", "--mesh", "--image", kImage, "--no-upload"};
  args.insert(args.end(), needs.begin(), needs.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

json provider_named(const json& mesh, const std::string& name) {
  for (const auto& p : mesh["providers"]) {
    if (p["name"] == name) return p;
  }
  return nullptr;
}

TEST_F(MeshRun, AJobLandsOnTheOnlyProviderThatFitsAndMeshShowsBoth) {
  TempDir dir;
  Node small(dir, "small", true, provider_env("fake:1:SMALL:16", "site=lab1")),
      big(dir, "big", true, provider_env("fake:1:BIG:48", "site=lab2")), laptop(dir, "laptop", false);
  pair_for_mesh(laptop, small);
  pair_for_mesh(laptop, big);

  json mesh = laptop.yonder_json({"mesh"});
  ASSERT_EQ(mesh["providers"].size(), 2u) << mesh.dump();
  json s = provider_named(mesh, "small"), b = provider_named(mesh, "big");
  ASSERT_FALSE(s.is_null());
  ASSERT_FALSE(b.is_null());
  EXPECT_EQ(s["state"], "ok") << s.dump();
  EXPECT_EQ(s["node_id"], small.node_id());
  EXPECT_EQ(s["gpus"][0]["model"], "FAKE SMALL");
  EXPECT_EQ(s["gpus"][0]["memory_bytes"], uint64_t{16} << 30);
  EXPECT_EQ(s["gpus"][0]["cuda"], "8.0");
  EXPECT_EQ(s["free"], 1);
  EXPECT_EQ(s["labels"]["site"], "lab1");
  EXPECT_EQ(b["gpus"][0]["model"], "FAKE BIG");
  EXPECT_EQ(b["backends"], json::array({"docker"}));
  EXPECT_TRUE(b["fresh"].get<bool>());
  EXPECT_GT(b["rtt_ms"].get<double>(), 0.0);
  EXPECT_EQ(mesh["totals"]["gpus"], 2);
  EXPECT_EQ(mesh["totals"]["free"], 2);
  auto table = laptop.yonder({"mesh"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("FAKE BIG"), std::string::npos) << table.out;

  // Only big has 40 GiB: the job lands there, and says why.
  auto r = laptop.yonder(mesh_run({"--vram", "40G"}, {"sh", "-c", "echo placed; exit 4"}));
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.out.find("placed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mesh: chose big"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("score "), std::string::npos) << r.err;
  // No receipts yet: our standing is the starting allowance everywhere (3600 / (3600 + 3600) x 0.5).
  EXPECT_NE(r.err.find("+ credit 0.25"), std::string::npos) << r.err;
  json ps = laptop.yonder_json({"ps", "--all"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();
  EXPECT_EQ(ps["jobs"][0]["provider"], big.node_id()) << ps.dump();

  // The lease went with the job: big's GPU is free again and takes the next one.
  r = laptop.yonder(mesh_run({"--vram", "40G", "--label", "site=lab2"}, {"true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(provider_named(laptop.yonder_json({"mesh"}), "big")["free"], 1);

  // A label only small has.
  r = laptop.yonder(mesh_run({"--label", "site=lab1"}, {"true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("mesh: chose small"), std::string::npos) << r.err;

  // Nobody has it: the clear error, and nothing submitted.
  r = laptop.yonder(mesh_run({"--gpus", "2", "--vram", "24G"}, {"true"}));
  EXPECT_EQ(r.exit_code, 125) << r.err;  // kExitCouldNotRun
  EXPECT_NE(r.err.find("no paired provider has 2 free GPUs with 24 GiB; `yonder mesh` shows what there is"),
            std::string::npos)
      << r.err;
  r = laptop.yonder(mesh_run({"--cuda", "9.0"}, {"true"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("compute capability 9.0"), std::string::npos) << r.err;
  EXPECT_EQ(laptop.yonder_json({"ps", "--all"})["jobs"].size(), 3u);

  // --mesh with --on is a usage error.
  r = laptop.yonder({"run", "--mesh", "--on", "big", "--image", kImage, "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

TEST_F(MeshRun, TwoConsumersAtOnceNeverShareAGpu) {
  TempDir dir;
  Node small(dir, "small", true, provider_env("fake:1:SMALL:16", "")),
      big(dir, "big", true, provider_env("fake:1:BIG:48", "")), alice(dir, "alice", false), bob(dir, "bob", false);
  for (const Node* c : {&alice, &bob}) {
    pair_for_mesh(*c, small);
    pair_for_mesh(*c, big);
  }
  auto detached = [&](std::vector<std::string> needs) {
    needs.push_back("-d");
    std::vector<std::string> args = mesh_run(needs, {"sleep", "60"});
    args.insert(args.begin(), program_path("yonder"));
    return args;
  };

  // Both fit anywhere: each gets a GPU, and never the same one.
  {
    BackgroundProcess a(detached({"--vram", "8G"}), alice.env()), b(detached({"--vram", "8G"}), bob.env());
    RunResult ra = a.wait(), rb = b.wait();
    ASSERT_EQ(ra.exit_code, 0) << ra.err;
    ASSERT_EQ(rb.exit_code, 0) << rb.err;
    std::string pa = alice.yonder_json({"ps"})["jobs"][0]["provider"];
    std::string pb = bob.yonder_json({"ps"})["jobs"][0]["provider"];
    EXPECT_NE(pa, pb) << "alice: " << ra.err << "\nbob: " << rb.err;
    json mesh = alice.yonder_json({"mesh"});
    EXPECT_EQ(mesh["totals"]["free"], 0) << mesh.dump();
    // Nothing left: a third job is refused clearly.
    auto r = alice.yonder(mesh_run({"--vram", "8G"}, {"true"}));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("no paired provider has 1 free GPU with 8 GiB"), std::string::npos) << r.err;
    for (const Node* c : {&alice, &bob}) {
      std::string id = c->yonder_json({"ps"})["jobs"][0]["job_id"];
      EXPECT_EQ(c->yonder({"stop", id}).exit_code, 0);
      c->yonder({"logs", "-f", id});  // returns once the job has ended (and its lease with it)
    }
  }

  // Only big fits, both ask at once: exactly one gets it, the other a clear refusal.
  BackgroundProcess a(detached({"--vram", "40G"}), alice.env()), b(detached({"--vram", "40G"}), bob.env());
  RunResult ra = a.wait(), rb = b.wait();
  EXPECT_EQ((ra.exit_code == 0) + (rb.exit_code == 0), 1) << "alice: " << ra.err << "\nbob: " << rb.err;
  const RunResult& loser = ra.exit_code == 0 ? rb : ra;
  bool clear = loser.err.find("no paired provider has 1 free GPU with 40 GiB") != std::string::npos ||
               loser.err.find("every provider that could run it refused a lease (big: busy") != std::string::npos;
  EXPECT_TRUE(clear) << loser.err;
  size_t running_on_big = 0;
  std::string seen;
  for (const Node* c : {&alice, &bob}) {
    json ps = c->yonder_json({"ps"});
    seen += ps.dump() + "\n";
    for (const auto& j : ps["jobs"]) running_on_big += j["provider"] == big.node_id();
  }
  EXPECT_EQ(running_on_big, 1u) << seen;
}

// The lease book lives in memory: a provider restarted while a lease it
// granted (not yet tied to a job) is unexpired grants nothing until it
// would have run out, and says so as "busy".
TEST_F(MeshRun, ARestartedProviderGrantsNothingWithinTheLeaseTerm) {
  TempDir dir;
  Node big(dir, "big", true, provider_env("fake:1:BIG:48", ""), "[mesh]\nlease_term_s = 600\n"),
      laptop(dir, "laptop", false);
  pair_for_mesh(laptop, big);
  // A lease taken by hand and never used (a consumer that died before submitting).
  json offer = {{"kind", "offer"}, {"request_id", 1}, {"gpus", 1}, {"vram_bytes", 0}, {"min_capability", 0},
                {"term_ms", 600000}, {"timeout_ms", 5000}};
  auto call = laptop.yonder({"call", "big", "mesh.lease", json{{"message", offer.dump()}}.dump()});
  ASSERT_EQ(call.exit_code, 0) << call.err;
  EXPECT_NE(call.out.find("accept"), std::string::npos) << call.out;
  auto r = laptop.yonder(mesh_run({}, {"true"}));
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no paired provider has 1 free GPU"), std::string::npos) << r.err;

  big.crash_and_restart();  // SIGKILL: nothing is written on the way down
  json b = provider_named(laptop.yonder_json({"mesh"}), "big");
  EXPECT_EQ(b["free"], 0) << b.dump();  // advertised as leased until the old term ends
  call = laptop.yonder({"call", "big", "mesh.lease", json{{"message", offer.dump()}}.dump()});
  ASSERT_EQ(call.exit_code, 0) << call.err;
  EXPECT_NE(call.out.find("refuse"), std::string::npos) << call.out;
  EXPECT_NE(call.out.find("busy"), std::string::npos) << call.out;
}

}  // namespace
}  // namespace yonder::testing
