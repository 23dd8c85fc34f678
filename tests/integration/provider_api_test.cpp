// Provider jobs through the real yonderd's local API: logs from offsets and
// followed by long-poll, stderr kept apart, exec, stop, the executor route,
// and clear refusals.
#include <gtest/gtest.h>

#include "os/unix_http.h"
#include "support/api_token.h"
#include "support/provider_node.h"

namespace yonder::testing {
namespace {

class ProviderApi : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

TEST_F(ProviderApi, LogsCanBeReadFromAnyReturnedOffsetAndFollowed) {
  ProviderNode node;
  auto j = node.submit({{"command", {"sh", "-c", "echo first; echo oops >&2; sleep 1; echo second"}}});
  std::string id = j["job_id"];
  EXPECT_TRUE(j["state"] == "pending" || j["state"] == "starting" || j["state"] == "running") << j.dump();
  auto first = node.await_output(id);
  EXPECT_NE(first.out + first.err, "");
  auto all = node.await_end(id);
  EXPECT_EQ(all.out, "first\nsecond\n");
  EXPECT_EQ(all.err, "oops\n");
  // Re-read after the fact, from 0 and from an offset in the middle.
  auto again = node.logs(id, 0);
  EXPECT_TRUE(again.ended);
  EXPECT_EQ(again.out, "first\nsecond\n");
  auto tail = node.logs(id, first.next_offset);
  EXPECT_EQ(first.out + tail.out, "first\nsecond\n");
  EXPECT_EQ(first.err + tail.err, "oops\n");
  auto bad = node.api("GET", "/v1/provider/jobs/logs?id=" + id + "&offset=3");
  EXPECT_EQ(bad.status, 400) << bad.body.dump();
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("use an offset this API returned"), std::string::npos);
  auto v = node.job(id);
  EXPECT_EQ(v["state"], "exited");
  EXPECT_EQ(v["exit_code"], 0);
}

TEST_F(ProviderApi, ExitCodeExecAndStop) {
  ProviderNode node;
  std::string failing = node.submit({{"command", {"sh", "-c", "exit 42"}}})["job_id"];
  std::string id = node.submit({{"command", {"sh", "-c", "echo up; sleep 120"}}})["job_id"];
  node.await_output(id);
  auto e = node.api("POST", "/v1/provider/jobs/exec", {{"job_id", id}, {"command", {"sh", "-c", "echo hi; echo no >&2; exit 2"}}});
  ASSERT_EQ(e.status, 200) << e.body.dump();
  EXPECT_EQ(e.body["exit_code"], 2);
  EXPECT_EQ(e.body["stdout_b64"], base64_encode(as_bytes("hi\n")));
  EXPECT_EQ(e.body["stderr_b64"], base64_encode(as_bytes("no\n")));
  auto t0 = std::chrono::steady_clock::now();
  auto stop = node.api("POST", "/v1/provider/jobs/stop", {{"job_id", id}});
  ASSERT_EQ(stop.status, 200) << stop.body.dump();
  node.await_end(id);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
  auto v = node.job(id);
  EXPECT_EQ(v["state"], "stopped");
  EXPECT_EQ(v["reason"], "stopped");
  node.await_end(failing);
  EXPECT_EQ(node.job(failing)["exit_code"], 42);
  auto list = node.api("GET", "/v1/provider/jobs");
  EXPECT_EQ(list.body.size(), 2u);
}

TEST_F(ProviderApi, WallTimeLimitStopsTheJob) {
  ProviderNode node;
  std::string id = node.submit({{"wall_time_s", 1}, {"command", {"sleep", "100"}}})["job_id"];
  node.await_end(id);
  auto v = node.job(id);
  EXPECT_EQ(v["state"], "stopped");
  EXPECT_EQ(v["reason"], "wall_time");
  EXPECT_NE(v["message"].get<std::string>().find("wall-time limit of 1 s"), std::string::npos) << v.dump();
}

// GET /metrics times the Docker executor's steps (docs/metrics.md): the
// families are there from the start with no samples, and one job start is
// one sample in each Docker series (none in Slurm's).
TEST_F(ProviderApi, MetricsTimeTheDockerStart) {
  ProviderNode node;
  auto metrics = [&node] {
    os::HttpRequestOptions o;
    o.bearer_token = api_token(node.home());
    auto r = os::unix_http_request(node.home() + "/yonderd.sock", "GET", "/metrics", "", o);
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->body : std::string();
  };
  auto value = [](const std::string& text, const std::string& series) {
    size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 2));
  };
  std::string before = metrics();
  for (const char* family : {"yonder_executor_start_seconds", "yonder_executor_container_create_seconds",
                             "yonder_executor_container_start_seconds", "yonder_executor_slurm_submit_seconds"}) {
    EXPECT_NE(before.find(std::string("# TYPE ") + family + " histogram"), std::string::npos) << family;
  }
  EXPECT_EQ(value(before, "yonder_executor_container_create_seconds_count"), 0) << before;
  EXPECT_EQ(value(before, "yonder_executor_start_seconds_count{backend=\"docker\"}"), 0) << before;

  std::string id = node.submit({{"command", {"true"}}})["job_id"];
  node.await_end(id);
  std::string after = metrics();
  EXPECT_EQ(value(after, "yonder_executor_container_create_seconds_count"), 1) << after;
  EXPECT_EQ(value(after, "yonder_executor_container_create_seconds_bucket{le=\"+Inf\"}"), 1) << after;
  EXPECT_EQ(value(after, "yonder_executor_container_start_seconds_count"), 1) << after;
  EXPECT_GT(value(after, "yonder_executor_container_start_seconds_sum"), 0) << after;
  EXPECT_EQ(value(after, "yonder_executor_start_seconds_count{backend=\"docker\"}"), 1) << after;
  EXPECT_EQ(value(after, "yonder_executor_start_seconds_count{backend=\"slurm\"}"), 0) << after;
  EXPECT_EQ(value(after, "yonder_executor_slurm_submit_seconds_count"), 0) << after;
}

TEST_F(ProviderApi, RefusalsSayWhatToDo) {
  ProviderNode node;
  auto image = node.api("POST", "/v1/provider/jobs", {{"image", "busybox"}});
  EXPECT_EQ(image.status, 403);
  EXPECT_NE(image.body["error"]["message"].get<std::string>().find("executor.image_allowlist"), std::string::npos);
  auto typo = node.api("POST", "/v1/provider/jobs", {{"image", kTestImage}, {"memroy_mib", 1}});
  EXPECT_EQ(typo.status, 400);
  auto big = node.api("POST", "/v1/provider/jobs", {{"image", kTestImage}, {"memory_mib", 1 << 20}});
  EXPECT_EQ(big.status, 403);
  EXPECT_NE(big.body["error"]["message"].get<std::string>().find("jobs.max_memory_mib"), std::string::npos);
  auto gpus = node.api("POST", "/v1/provider/jobs", {{"image", kTestImage}, {"gpus", 5}});
  EXPECT_EQ(gpus.status, 409);
  auto missing = node.api("GET", "/v1/provider/jobs?id=nope");
  EXPECT_EQ(missing.status, 404);
  auto fp = node.api("GET", "/v1/provider/executor");
  ASSERT_EQ(fp.status, 200);
  EXPECT_EQ(fp.body["healthy"], true);
  EXPECT_EQ(fp.body["engine"], "docker");
}

}  // namespace
}  // namespace yonder::testing
