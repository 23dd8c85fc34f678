// `yonder run --mesh` end to end (issue 10): real yonderds over loopback
// links, jobs on the real dockerd (fake GPUs without the NVIDIA runtime).
// Providers of different fake GPUs advertise signed capacity; a consumer
// sees both (`yonder mesh`), a job lands on the one that fits, an
// infeasible one gets the clear error, and two consumers asking at once for
// the only fitting GPU never both get it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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

TEST_F(MeshRun, MeshWithoutTheMeshCapabilityFailsAndSaysHowToGetIt) {
  TempDir dir;
  Node studio(dir, "studio", true, provider_env("fake:1:BIG:48", "")), laptop(dir, "laptop", false);
  auto alone = laptop.yonder({"mesh"});
  EXPECT_EQ(alone.exit_code, 1) << alone.out;
  EXPECT_NE(alone.err.find("no paired provider"), std::string::npos) << alone.err;
  laptop.pair_with(studio, {"--scope", "run"});
  auto no_mesh = laptop.yonder({"mesh"});
  EXPECT_EQ(no_mesh.exit_code, 1) << no_mesh.out << no_mesh.err;
  EXPECT_NE(no_mesh.err.find("--scope run,mesh"), std::string::npos) << no_mesh.err;
  ASSERT_EQ(studio.yonder({"scope", "laptop", "--add", "mesh"}).exit_code, 0);
  auto with_mesh = laptop.yonder({"mesh"});
  EXPECT_EQ(with_mesh.exit_code, 0) << with_mesh.err;
  EXPECT_NE(with_mesh.out.find("BIG"), std::string::npos) << with_mesh.out;
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

// `run --mesh --group G` ranks only the providers in G's list (the one this
// node holds): a job goes to the group's provider even though the other
// provider ranked first without the group; `mesh --group G` shows only the
// members; a group this node is not in is a clear error.
TEST_F(MeshRun, AGroupJobGoesToTheGroupsProviderEvenWhenAnotherRanksHigher) {
  TempDir dir;
  Node small(dir, "small", true, provider_env("fake:1:SMALL:16", "")),
      big(dir, "big", true, provider_env("fake:1:BIG:48", "")), laptop(dir, "laptop", false);
  pair_for_mesh(laptop, small);
  pair_for_mesh(laptop, big);

  // Without a group: whichever ranks first (equal GPUs for this job, so the
  // score's RTT or the key decides) gets it.
  auto r = laptop.yonder(mesh_run({}, {"true"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  bool big_first = r.err.find("mesh: chose big") != std::string::npos;
  ASSERT_TRUE(big_first || r.err.find("mesh: chose small") != std::string::npos) << r.err;
  EXPECT_NE(r.err.find("out of 2 feasible"), std::string::npos) << r.err;
  const Node& winner = big_first ? big : small;
  const Node& member = big_first ? small : big;

  // The group: laptop owns it, the provider that lost joins with an invite.
  ASSERT_EQ(laptop.yonder({"group", "create", "lab"}).exit_code, 0);
  json invite = laptop.yonder_json({"group", "invite", "lab", "--scope", "run"});
  auto joined = member.yonder({"group", "join", invite.value("link", "")});
  ASSERT_EQ(joined.exit_code, 0) << joined.err;

  for (int i = 0; i < 2; ++i) {
    r = laptop.yonder(mesh_run({"--group", "lab"}, {"true"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("mesh: chose " + std::string(big_first ? "small" : "big") + " ("), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("out of 1 feasible"), std::string::npos) << r.err;
  }
  json ps = laptop.yonder_json({"ps", "--all"});
  size_t on_member = 0, on_winner = 0;
  for (const auto& j : ps["jobs"]) {
    on_member += j["provider"] == member.node_id();
    on_winner += j["provider"] == winner.node_id();
  }
  EXPECT_EQ(on_member, 2u) << ps.dump();
  EXPECT_EQ(on_winner, 1u) << ps.dump();

  json mesh = laptop.yonder_json({"mesh", "--group", "lab"});
  ASSERT_EQ(mesh["providers"].size(), 1u) << mesh.dump();
  EXPECT_EQ(mesh["providers"][0]["node_id"], member.node_id());
  EXPECT_EQ(mesh["group"]["name"], "lab");
  EXPECT_EQ(laptop.yonder_json({"mesh"})["providers"].size(), 2u);

  // A group whose members offer nothing: the error names the group.
  ASSERT_EQ(laptop.yonder({"group", "create", "solo"}).exit_code, 0);
  r = laptop.yonder(mesh_run({"--group", "solo"}, {"true"}));
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("no paired provider has 1 free GPU in group solo"), std::string::npos) << r.err;
  // Not in the group: says where to look.
  r = laptop.yonder(mesh_run({"--group", "nosuch"}, {"true"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("`yonder group list`"), std::string::npos) << r.err;
  r = laptop.yonder({"mesh", "--group", "nosuch"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("`yonder group list`"), std::string::npos) << r.err;
  // --group is a placement need: without --mesh it is a usage error.
  r = laptop.yonder({"run", "--on", "big", "--group", "lab", "--image", kImage, "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(laptop.yonder_json({"ps", "--all"})["jobs"].size(), 3u);
}

// Polls `mesh --cached` on `node` (no asking) until `check` holds for the
// provider `name` or 120 s pass; the last state goes into the failure.
bool cached_eventually(const Node& node, const std::string& name, const std::function<bool(const json&)>& check) {
  json last;
  bool held = wait_until(
      [&] {
        last = provider_named(node.yonder_json({"mesh", "--cached"}), name);
        return !last.is_null() && check(last);
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50));
  if (held) return true;
  ADD_FAILURE() << "timed out; last: " << last.dump();
  return false;
}

// A provider pushes its advertisement when it changes: the consumer's
// snapshot (`mesh --cached`, GET /v1/mesh?refresh=0) shows a job's GPU
// taken and freed again without asking; a push that does not verify is
// refused and changes nothing.
TEST_F(MeshRun, PushedAdvertisementsKeepTheSnapshotFreshWithoutAsking) {
  TempDir dir;
  Node big(dir, "big", true, provider_env("fake:1:BIG:48", "")), laptop(dir, "laptop", false);
  pair_for_mesh(laptop, big);
  json b = provider_named(laptop.yonder_json({"mesh"}), "big");  // one pull
  ASSERT_EQ(b["free"], 1) << b.dump();
  EXPECT_EQ(b["source"], "pulled");

  // A job (not placed by the mesh) takes the GPU: the push says so.
  auto d = laptop.yonder({"run", "--on", "big", "--image", kImage, "--no-upload", "--gpus", "1", "-d", "--", "sleep",
                          "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string job = d.out.substr(0, d.out.find('\n'));
  EXPECT_TRUE(cached_eventually(laptop, "big", [](const json& p) {
    return p["source"] == "pushed" && p["free"] == 0 && p["gpus"][0]["leased"] == true;
  }));

  // A push that does not verify is refused and leaves the snapshot alone.
  auto forged = big.yonder({"call", "laptop", "advertisement.push", json{{"advertisement", "{}"}}.dump()});
  EXPECT_NE(forged.exit_code, 0) << forged.out;
  EXPECT_NE((forged.out + forged.err).find("malformed"), std::string::npos) << forged.out << forged.err;
  EXPECT_EQ(provider_named(laptop.yonder_json({"mesh", "--cached"}), "big")["free"], 0);

  // Its end frees the GPU: pushed again.
  ASSERT_EQ(laptop.yonder({"stop", job}).exit_code, 0);
  EXPECT_TRUE(cached_eventually(laptop, "big", [](const json& p) { return p["source"] == "pushed" && p["free"] == 1; }));
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
