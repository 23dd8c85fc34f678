// Reputation and the known-answer benchmark end to end (issue 10): real
// yonderds over loopback links, the benchmark job on the real dockerd (fake
// GPUs without the NVIDIA runtime, the busybox test image's awk). A
// consumer checks one of two otherwise equal providers with `yonder mesh
// verify`; the passed check and the job's countersigned receipt give that
// provider standing, `yonder mesh` shows it, and placement prefers it.
// (The clique case is tests/node/reputation_test.cpp, against real stores.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

class MeshVerify : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

// No automatic benchmarks in tests: only the ones a test asks for.
Env node_env(const std::string& inventory = "") {
  Env e = {{"YONDER_MESH_BENCHMARK_INTERVAL_S", "0"}, {"YONDER_MESH_BENCHMARK_IMAGE", kImage}};
  if (!inventory.empty()) {
    e["YONDER_GPU_FAKE_WITHOUT_RUNTIME"] = "true";
    e["YONDER_GPU_INVENTORY"] = inventory;
  }
  return e;
}

json provider_named(const json& mesh, const std::string& name) {
  for (const auto& p : mesh["providers"]) {
    if (p["name"] == name) return p;
  }
  return nullptr;
}

TEST_F(MeshVerify, APassedBenchmarkGivesStandingThatPlacementPrefers) {
  TempDir dir;
  // Same GPU, same (empty) queue, both direct on loopback: without
  // reputation their scores differ only by RTT noise.
  Node alpha(dir, "alpha", true, node_env("fake:1:TWIN:24")), beta(dir, "beta", true, node_env("fake:1:TWIN:24")),
      laptop(dir, "laptop", false, node_env());
  for (const Node* p : {&alpha, &beta}) laptop.pair_with(*p, {"--scope", "run,mesh", "--max-jobs", "4"});

  json mesh = laptop.yonder_json({"mesh"});
  ASSERT_EQ(mesh["providers"].size(), 2u) << mesh.dump();
  for (const char* name : {"alpha", "beta"}) {
    json p = provider_named(mesh, name);
    EXPECT_EQ(p["reputation"], 0.0) << p.dump();
    EXPECT_TRUE(p["benchmark"].is_null()) << p.dump();
  }

  // The check: a job through the normal path, its answer compared here.
  auto v = laptop.yonder({"mesh", "verify", "beta", "--size", "24", "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err << v.out;
  json out = json::parse(v.out);
  EXPECT_EQ(out["outcome"], "passed") << out.dump();
  EXPECT_EQ(out["provider"]["node_id"], beta.node_id());
  const json& d = out["verification"]["details"];
  EXPECT_EQ(out["verification"]["kind"], "known_answer");
  EXPECT_EQ(d["n"], 24);
  EXPECT_EQ(d["answer"], d["expected"]) << d.dump();
  EXPECT_EQ(d["gpu_model"], "FAKE TWIN");
  EXPECT_TRUE(d.contains("seconds")) << d.dump();
  EXPECT_GT(d["rate_madds_per_s"].get<double>(), 0.0);
  // It ran as an ordinary job of ours, and its receipt is countersigned.
  std::string job_id = out["job_id"];
  json ps = laptop.yonder_json({"ps", "--all"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();
  EXPECT_EQ(ps["jobs"][0]["job_id"], job_id);
  // The receipt is fetched and countersigned when the job's end is seen;
  // each `yonder receipts` also sweeps for it (an event, not a timer).
  std::string receipt_state;
  EXPECT_TRUE(wait_until([&] {
    json receipts = laptop.yonder_json({"receipts"});
    for (const auto& r : receipts["receipts"]) {
      if (r.value("job_id", "") == job_id) receipt_state = r.value("state", "");
    }
    return receipt_state == "countersigned";
  })) << "the benchmark job's receipt was never countersigned";
  EXPECT_EQ(receipt_state, "countersigned") << laptop.yonder({"receipts"}).out;

  // Standing: shown per provider, nonzero for the checked one only.
  mesh = laptop.yonder_json({"mesh"});
  json b = provider_named(mesh, "beta"), a = provider_named(mesh, "alpha");
  EXPECT_GT(b["reputation"].get<double>(), 0.5) << b.dump();
  EXPECT_EQ(b["benchmark"]["outcome"], "passed") << b.dump();
  EXPECT_EQ(b["benchmark"]["details"]["job_id"], job_id);
  EXPECT_EQ(a["reputation"], 0.0) << a.dump();
  // Each provider answered mesh.opinions; beta's holds the benchmark job's
  // receipt, signed by both once our countersignature (sent after we stored
  // it) has reached beta: ask again until it has.
  EXPECT_TRUE(wait_until(
      [&] {
        if (b["opinions"]["receipts"] == 1) return true;
        b = provider_named(laptop.yonder_json({"mesh"}), "beta");
        return b["opinions"]["receipts"] == 1;
      },
      std::chrono::seconds(60)))
      << "beta never held the countersigned receipt";
  EXPECT_EQ(b["opinions"]["receipts"], 1) << b.dump();
  EXPECT_EQ(b["opinions"]["dropped"], 0) << b.dump();
  EXPECT_EQ(a["opinions"]["receipts"], 0) << a.dump();
  EXPECT_FALSE(a["opinions"].contains("error")) << a.dump();
  auto table = laptop.yonder({"mesh"});
  EXPECT_NE(table.out.find("benchmark passed"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("not benchmarked"), std::string::npos) << table.out;

  // Placement: otherwise equal, the provider with standing wins (its
  // reputation term, 2 x about 0.85, dwarfs the RTT term's noise).
  auto r = laptop.yonder({"run", "--mesh", "--image", kImage, "--no-upload", "--", "echo", "placed"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("mesh: chose beta"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reputation"), std::string::npos) << r.err;
}

// A provider that cannot produce the answer (here: its own wall-time limit
// kills the job long before a 512 x 512 product in busybox awk, about two
// minutes of work, is done) fails the check, and the failure costs it the
// standing a passed check gave it.
TEST_F(MeshVerify, AFailedCheckCostsTheProviderItsStanding) {
  TempDir dir;
  // Appended to the [jobs] table a provider node's config ends with (support/job_node.h).
  Node slow(dir, "slow", true, node_env("fake:1:TWIN:24"), "default_wall_time_s = 3\n"),
      laptop(dir, "laptop", false, node_env());
  laptop.pair_with(slow, {"--scope", "run,mesh", "--max-jobs", "4"});

  auto pass = laptop.yonder({"mesh", "verify", "slow", "--size", "8"});
  ASSERT_EQ(pass.exit_code, 0) << pass.err << pass.out;
  EXPECT_NE(pass.out.find("benchmark passed"), std::string::npos) << pass.out;
  EXPECT_GT(provider_named(laptop.yonder_json({"mesh"}), "slow")["reputation"].get<double>(), 0.0);

  auto fail = laptop.yonder({"mesh", "verify", "slow", "--size", "512", "--json"});
  EXPECT_EQ(fail.exit_code, 8) << fail.err << fail.out;  // kExitVerificationFailed
  json out = json::parse(fail.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << fail.out;
  EXPECT_EQ(out["outcome"], "failed");
  EXPECT_NE(out["verification"]["details"].value("reason", "").find("did not exit 0"), std::string::npos) << out.dump();
  json p = provider_named(laptop.yonder_json({"mesh"}), "slow");
  EXPECT_EQ(p["benchmark"]["outcome"], "failed") << p.dump();
  EXPECT_EQ(p["reputation"], 0.0) << p.dump();
  auto table = laptop.yonder({"mesh"});
  EXPECT_NE(table.out.find("benchmark failed"), std::string::npos) << table.out;
}

// The GPU check end to end, with a test double where the GPU would be: the
// providers lend fake GPUs (no NVIDIA runtime) and the check's image holds
// this machine's Python with the PyTorch test double
// (scripts/build-torch-double-image.sh), whose device is named "FAKE TWIN".
// A claim is unverified until the check passes on that model; a provider
// whose job names another GPU than it advertises fails it.
TEST_F(MeshVerify, AGpuClaimIsUnverifiedUntilTheGpuCheckPassesOnThatModel) {
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  auto built = run({std::string(src != nullptr ? src : ".") + "/scripts/build-torch-double-image.sh"});
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  TempDir dir;
  Env consumer = node_env();
  consumer["YONDER_MESH_GPU_BENCHMARK_IMAGE"] = "yonder-test/torch-double:1";
  Node twin(dir, "twin", true, node_env("fake:1:TWIN:24")), other(dir, "other", true, node_env("fake:1:OTHER:24")),
      laptop(dir, "laptop", false, consumer);
  for (const Node* p : {&twin, &other}) laptop.pair_with(*p, {"--scope", "run,mesh", "--max-jobs", "4"});

  json mesh = laptop.yonder_json({"mesh"});
  for (const char* name : {"twin", "other"}) {
    EXPECT_EQ(provider_named(mesh, name)["gpus"][0]["claim"], "unverified") << mesh.dump();
  }
  auto table = laptop.yonder({"mesh"});
  EXPECT_NE(table.out.find("GPU claim unverified: FAKE TWIN"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("yonder mesh verify twin --gpu"), std::string::npos) << table.out;

  auto v = laptop.yonder({"mesh", "verify", "twin", "--gpu", "--size", "8", "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err << v.out;
  json out = json::parse(v.out);
  const json& d = out["verification"]["details"];
  EXPECT_EQ(out["outcome"], "passed") << out.dump();
  EXPECT_EQ(d["gpu"], true);
  EXPECT_EQ(d["device"], "FAKE TWIN");
  EXPECT_EQ(d["answer"], d["expected"]) << d.dump();
  EXPECT_EQ(d["image"], "yonder-test/torch-double:1");

  mesh = laptop.yonder_json({"mesh"});
  EXPECT_EQ(provider_named(mesh, "twin")["gpus"][0]["claim"], "verified") << mesh.dump();
  EXPECT_EQ(provider_named(mesh, "other")["gpus"][0]["claim"], "unverified") << mesh.dump();
  table = laptop.yonder({"mesh"});
  EXPECT_NE(table.out.find("GPU claim verified: FAKE TWIN"), std::string::npos) << table.out;

  // The job on `other` answers right but names FAKE TWIN, not the FAKE OTHER it advertises.
  auto lie = laptop.yonder({"mesh", "verify", "other", "--gpu", "--size", "8", "--json"});
  EXPECT_EQ(lie.exit_code, 8) << lie.err << lie.out;
  out = json::parse(lie.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << lie.out;
  EXPECT_EQ(out["outcome"], "failed");
  EXPECT_NE(out["verification"]["details"].value("reason", "").find("the advertisement claims \"FAKE OTHER\""),
            std::string::npos)
      << out.dump();
  mesh = laptop.yonder_json({"mesh"});
  EXPECT_EQ(provider_named(mesh, "other")["gpus"][0]["claim"], "failed") << mesh.dump();

  // A GPU check needs a GPU claim and an image: the CPU check still runs without either.
  auto cpu = laptop.yonder({"mesh", "verify", "other", "--cpu", "--size", "4", "--json"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err << cpu.out;
  EXPECT_EQ(json::parse(cpu.out)["verification"]["details"]["gpu"], false);
  mesh = laptop.yonder_json({"mesh"});
  EXPECT_EQ(provider_named(mesh, "other")["gpus"][0]["claim"], "failed") << "a CPU pass confirms no GPU";
}

TEST_F(MeshVerify, ABenchmarkThatCannotBeSubmittedRecordsNothing) {
  TempDir dir;
  Node provider(dir, "prov", true, node_env("fake:1:TWIN:24")), laptop(dir, "laptop", false, node_env());
  laptop.pair_with(provider, {"--scope", "mesh"});
  // Not a peer; a peer that refuses the job (no `run` scope): errors, not failed checks.
  auto unknown = laptop.yonder({"mesh", "verify", "nobody"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.exit_code, 8) << unknown.err;
  auto refused = laptop.yonder({"mesh", "verify", "prov", "--size", "4"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.exit_code, 8) << refused.err;
  // No GPU benchmark image configured: the GPU check says what to set.
  auto no_image = laptop.yonder({"mesh", "verify", "prov", "--gpu"});
  EXPECT_NE(no_image.exit_code, 0);
  EXPECT_NE(no_image.exit_code, 8);
  EXPECT_NE(no_image.err.find("mesh.gpu_benchmark_image"), std::string::npos) << no_image.err;
  json mesh = laptop.yonder_json({"mesh"});
  EXPECT_TRUE(provider_named(mesh, "prov")["benchmark"].is_null()) << mesh.dump();
}

}  // namespace
}  // namespace yonder::testing
