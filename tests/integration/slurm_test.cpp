// A Slurm provider end to end (issue 9): a provider yonderd with
// executor.backend = slurm in front of scripts/slurm.sh's one-node cluster
// (two fake GPUs), a consumer yonderd paired with it, driven through the
// CLI: `yonder run --on` with an upload and a GPU (CUDA_VISIBLE_DEVICES set
// by Slurm), logs streamed while the job runs, the cluster's GPUs in the
// provider's inventory, an impossible request refused with Slurm's reason,
// and a job re-adopted by its Slurm id after the provider restarts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "os/unix_http.h"
#include "support/api_token.h"
#include "support/job_node.h"
#include "support/slurm_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

constexpr const char* kImage = "yonder-test/busybox:1";  // allowed; a Slurm provider runs the command on the node

class SlurmProvider : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_SLURM_OR_SKIP();
    std::random_device rd;
    root_ = slurm_work_root() + "/e2e-" + std::to_string(rd()) + std::to_string(rd());
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
  }
  void TearDown() override {
    if (root_.empty()) return;
    // Jobs a failed test left in the cluster's queue.
    std::string ids = slurm_command({"squeue", "-h", "-o", "%i %k"});
    std::istringstream lines(ids);
    for (std::string id, comment; lines >> id >> comment;) {
      if (!provider_id_.empty() && comment.find("yonder:" + provider_id_ + ":") == 0) slurm_command({"scancel", id});
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  Env provider_env() const {
    return {{"YONDER_EXECUTOR", "slurm"}, {"YONDER_SLURM_CONF", slurm_conf()}, {"YONDER_SLURM_WORKDIR_ROOT", root_}};
  }

  std::string root_, provider_id_;
};

TEST_F(SlurmProvider, RunOnTheClusterStreamsLogsAndReadoptsAfterRestart) {
  TempDir dir;
  // Appended inside the [jobs] table job_node.h writes: a memory ceiling
  // above the cluster's node, so Slurm (not Yonder) refuses the big job.
  Node cluster(dir, "cluster", true, provider_env(), "max_memory_mib = 2000000\n"), laptop(dir, "laptop", false);
  provider_id_ = cluster.node_id();
  laptop.pair_with(cluster, {"--max-jobs", "4", "--gpus", "1"});
  // The consumer is told with the scope it was granted, not only at submit,
  // that this provider's jobs run without a container.
  {
    auto peers = laptop.yonder({"peers"});
    EXPECT_NE(peers.out.find("the provider says: jobs run on its Slurm cluster's nodes directly, without a container"),
              std::string::npos)
        << peers.out;
  }
  // `yonder gpu` on the provider shows the cluster's GPUs, from sinfo.
  auto gpus = cluster.yonder_json({"gpu"});
  EXPECT_EQ(gpus.value("source", ""), "slurm") << gpus.dump();
  EXPECT_EQ(gpus["devices"].size(), 2u) << gpus.dump();

  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/input.txt") << "uploaded payload\n";
  auto r = laptop.yonder({"run", "--on", "cluster", "--image", kImage, "--gpus", "1", "--upload", work, "--",
                          "sh", "-c", "cat input.txt; echo CVD=$CUDA_VISIBLE_DEVICES; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("uploaded payload\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.find("CVD=0\n") != std::string::npos || r.out.find("CVD=1\n") != std::string::npos) << r.out;
  // The consumer is told at submit that the job has no container around it.
  EXPECT_NE(r.err.find("the provider says: jobs run on its Slurm cluster's nodes directly, without a container"),
            std::string::npos)
      << r.err;

  // GET /metrics on the provider timed that sbatch (docs/metrics.md).
  {
    os::HttpRequestOptions o;
    o.bearer_token = api_token(cluster.home());
    auto m = os::unix_http_request(cluster.home() + "/yonderd.sock", "GET", "/metrics", "", o);
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("\nyonder_executor_slurm_submit_seconds_count 1\n"), std::string::npos) << m->body;
    EXPECT_NE(m->body.find("\nyonder_executor_start_seconds_count{backend=\"slurm\"} 1\n"), std::string::npos);
  }

  // Impossible on this cluster: Slurm's reason comes back to the consumer.
  auto big = laptop.yonder({"run", "--on", "cluster", "--image", kImage, "--no-upload", "--memory", "1000000M", "--",
                            "true"});
  EXPECT_NE(big.exit_code, 0);
  EXPECT_TRUE(big.err.find("not available") != std::string::npos || big.err.find("memory") != std::string::npos)
      << big.err;

  // Detached, waiting for a file the test writes: logs follow it while it
  // runs, across a provider restart (the job stays in Slurm's queue).
  std::string release = root_ + "/release";
  auto d = laptop.yonder({"run", "--on", "cluster", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "echo before; while [ ! -e " + release + " ]; do sleep 0.1; done; echo after"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  cluster.crash_and_restart();  // SIGKILL: the job stays in Slurm, the new daemon re-adopts it
  std::ofstream(release) << "go";
  auto after = cluster.yonder({"status"});
  ASSERT_EQ(after.exit_code, 0) << after.err << cluster.daemon().log();
  auto follow = laptop.yonder({"logs", "-f", id});
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, "before\nafter\n");
  auto ps = laptop.yonder_json({"ps", "--all"});
  bool found = false;
  for (const auto& j : ps["jobs"]) {
    if (j.value("job_id", "").rfind(id, 0) == 0 || j.value("id", "").rfind(id, 0) == 0) {
      found = true;
      EXPECT_EQ(j["state"], "exited") << j.dump();
      EXPECT_EQ(j["exit_code"], 0) << j.dump();
    }
  }
  EXPECT_TRUE(found) << ps.dump();
}

}  // namespace
}  // namespace yonder::testing
