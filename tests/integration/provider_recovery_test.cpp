// kill -9 of yonderd in the middle of jobs, then a restart: the running job
// is re-adopted and its log continues without duplicates, a job that ended
// while the daemon was down gets its exit status and logs, a container
// labelled as ours that no job claims is removed, and a job still running
// can be stopped by the new daemon.
#include <gtest/gtest.h>

#include "support/provider_node.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;

ApiResult docker(const std::string& method, const std::string& target, const nlohmann::json& body = nullptr) {
  os::HttpRequestOptions o;
  o.timeout = 60s;
  auto r = os::unix_http_request(docker_socket(), method, "/v1.41" + target, body.is_null() ? "" : body.dump(), o);
  if (!r) return {0, {}};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

TEST(ProviderRecovery, KillNineMidJobThenRestart) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  ProviderNode node;
  std::string owner = node.node_id();
  ASSERT_FALSE(owner.empty());
  // Each job waits for a file the test creates in its workspace (the
  // workspace is mounted on the host too), so what happens when is decided
  // by the test, not by timing.
  const std::string wait_go = "while [ ! -e /workspace/go ]; do sleep 0.05; done; ";
  // Runs across the restart: its log must continue without duplicates.
  std::string across = node.submit({{"command", {"sh", "-c", "echo before; " + wait_go + "echo after; exit 7"}}})["job_id"];
  // Ends while the daemon is down.
  std::string quick = node.submit({{"command", {"sh", "-c", "echo waiting; " + wait_go + "echo done; exit 3"}}})["job_id"];
  auto go = [&](const std::string& id) { std::ofstream(node.home() + "/jobs/" + id + "/workspace/go") << "go"; };
  // Still running after the restart; stopped by the new daemon.
  std::string longer = node.submit({{"command", {"sh", "-c", "echo long; sleep 300"}}})["job_id"];
  auto before = node.await_output(across);
  EXPECT_EQ(before.out, "before\n");
  node.await_output(longer);
  node.await_output(quick);
  ASSERT_EQ(node.job(quick)["state"], "running");

  // A container with our owner label that no job claims (as if a daemon
  // died between creating it and writing its job down, then lost the row).
  auto ghost = docker("POST", "/containers/create?name=yonder-ghost-" + owner.substr(0, 7),
                      {{"Image", kTestImage}, {"Cmd", {"sleep", "300"}},
                       {"Labels", {{"yonder.owner", owner}, {"yonder.job", "ghost"}}}});
  ASSERT_EQ(ghost.status, 201) << ghost.body.dump();
  std::string ghost_id = ghost.body["Id"];
  ASSERT_EQ(docker("POST", "/containers/" + ghost_id + "/start").status, 204);

  node.kill9();
  go(quick);
  // The quick job ends while nobody watches (an event: Docker's wait).
  std::string quick_container = "yonder-" + quick;
  auto waited = docker("POST", "/containers/" + quick_container + "/wait");
  ASSERT_EQ(waited.status, 200);
  EXPECT_EQ(waited.body["StatusCode"], 3);

  node.start();
  EXPECT_EQ(docker("GET", "/containers/" + ghost_id + "/json").status, 404) << "the unclaimed container was removed";

  auto q = node.await_end(quick);
  EXPECT_EQ(q.out, "waiting\ndone\n");
  auto qv = node.job(quick);
  EXPECT_EQ(qv["state"], "exited");
  EXPECT_EQ(qv["exit_code"], 3);

  EXPECT_EQ(node.job(across)["state"], "running") << "re-adopted";
  go(across);
  auto a = node.await_end(across);
  EXPECT_EQ(a.out, "before\nafter\n") << "re-adopted, and the log resumed without duplicates";
  auto av = node.job(across);
  EXPECT_EQ(av["state"], "exited");
  EXPECT_EQ(av["exit_code"], 7);

  EXPECT_EQ(node.job(longer)["state"], "running");
  ASSERT_EQ(node.api("POST", "/v1/provider/jobs/stop", {{"job_id", longer}}).status, 200);
  node.await_end(longer);
  EXPECT_EQ(node.job(longer)["state"], "stopped");
  EXPECT_EQ(docker("GET", "/containers/" + quick_container + "/json").status, 404) << "finished containers are removed";
}

}  // namespace
}  // namespace yonder::testing
