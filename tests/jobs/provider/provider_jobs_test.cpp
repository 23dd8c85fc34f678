// The provider job manager in-process against the real dockerd, with the
// FAKE GPU inventory (the only double: there is no GPU here): what needs a
// real engine and a real volume. A leased device reaching the container,
// the engine's own refusal of a GPU job without an NVIDIA runtime, the
// output hash over a real process's streams, workspace disk promised and
// taken back on a real (loop-mounted) volume, the logs cap over real files.
// Waits are events (log growth, job end) through watch_log, never sleeps.
//
// The queue's logic (order, limits, refusal, a queue order policy), wall
// time, VRAM watching, how jobs end, recovery, log descriptors and waiters
// are unit tests over the FakeExecutor in stepped time:
// provider_jobs_fake_test.cpp.
#include "jobs/provider/provider_jobs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <random>

#include "exec/docker/docker_executor.h"
#include "jobs/provider/job_output.h"
#include "os/loop_mount.h"
#include "store/migrations.h"
#include "support/docker_env.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::jobs::provider {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using protocol::parse_job_request;

class ProviderJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_DOCKER_OR_SKIP();
    std::random_device rd;
    owner_ = "pjt-" + std::to_string(rd()) + std::to_string(rd());
    make_executor(dir_ / "jobs");
  }
  void make_executor(const std::string& jobs_dir) {
    jobs_dir_ = jobs_dir;
    exec::docker::DockerOptions o;
    o.socket = testing::docker_socket();
    o.owner = owner_;
    o.jobs_dir = jobs_dir;
    o.images = *exec::ImagePolicy::parse("yonder-test/*", "never");
    executor_ = std::make_unique<exec::docker::DockerExecutor>(std::move(o));
  }
  // A small volume of its own for the jobs' folder (an ext4 image,
  // loop-mounted), so that a test can fill it; unmounted at the end.
  void use_small_volume(int64_t bytes) {
    std::string image = dir_ / "volume.img";
    volume_ = dir_ / "volume";
    ASSERT_TRUE(os::create_ext4_image(image, bytes, 0, 0).ok());
    ASSERT_TRUE(os::mount_loop(image, volume_).ok());
    make_executor(volume_ + "/jobs");
  }
  void TearDown() override {
    if (jobs_) jobs_->shutdown();
    jobs_.reset();
    if (executor_) {
      auto owned = executor_->list_owned();
      ASSERT_TRUE(owned.ok());
      for (auto& t : *owned) EXPECT_TRUE(executor_->destroy(t.handle, true).ok());
    }
    if (!volume_.empty()) {
      EXPECT_TRUE(os::unmount(volume_).ok());
    }
  }
  void start_manager(bool simulate = true, int per_peer = 2,
                     const std::function<void(ProviderOptions&)>& tweak = {}) {
    auto db = store::Database::open(dir_ / "state.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(store::migrate(*db).ok());
    ProviderOptions options;
    options.jobs_dir = jobs_dir_;
    options.simulate_gpus = simulate;
    options.max_per_peer = per_peer;
    options.stop_grace = 1s;
    options.vram_interval = 100ms;
    options.limits.default_memory_mib = 64;
    options.limits.default_disk_mib = 16;
    if (tweak) tweak(options);
    jobs_ = std::make_unique<ProviderJobs>(std::make_unique<JobStore>(std::move(*db)), *executor_, gpus_, options);
    ASSERT_TRUE(jobs_->start().ok());
  }
  std::string submit(const std::string& peer, json request) {
    request["image"] = testing::kTestImage;
    auto parsed = parse_job_request(request);
    EXPECT_TRUE(parsed.ok()) << parsed.error().to_string();
    auto v = jobs_->submit(PeerId(peer), *parsed);
    EXPECT_TRUE(v.ok()) << v.error().to_string();
    return v.ok() ? (*v)["job_id"].get<std::string>() : "";
  }
  // Blocks until the job has written output past `offset` or ended.
  void await_log(const std::string& id, uint64_t offset = 0) {
    auto p = std::make_shared<std::promise<void>>();
    ASSERT_TRUE(jobs_->watch_log(JobId(id), offset, [p] { p->set_value(); }).ok());
    ASSERT_EQ(p->get_future().wait_for(60s), std::future_status::ready) << "job " << id;
  }
  json await_end(const std::string& id) {
    await_log(id, UINT64_MAX);
    return *jobs_->get(JobId(id));
  }
  std::string output(const std::string& id) { return job_output(*jobs_, id); }

  testing::TempDir dir_;
  std::string jobs_dir_;
  std::string volume_;
  std::string owner_;
  gpu::FakeGpuInventory gpus_{2, "GPU", 24ULL << 30};
  std::unique_ptr<exec::docker::DockerExecutor> executor_;
  std::unique_ptr<ProviderJobs> jobs_;
};

// The leased device reaches the job's container (simulated: its UUID in the
// environment, no device request). Exclusive leases and the queue for a
// free device are provider_jobs_fake_test.cpp's.
TEST_F(ProviderJobsTest, ALeasedGpuReachesTheJobsContainer) {
  start_manager();
  std::string id = submit("p", {{"gpus", 1}, {"command", {"sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"}}});
  json end = await_end(id);
  EXPECT_EQ(end["state"], "exited");
  ASSERT_EQ(end["gpus"].size(), 1u);
  EXPECT_EQ(output(id), end["gpus"][0].get<std::string>() + "\n");
  EXPECT_TRUE(end["fake_gpus"].get<bool>());
  EXPECT_EQ(jobs_->executor_status()["leases"].size(), 0u) << "released at the end";
}

TEST_F(ProviderJobsTest, GpuJobOnAnEngineWithoutNvidiaRuntimeFailsBeforeStart) {
  if (executor_->fingerprint().gpu_capable) GTEST_SKIP() << "this engine has an NVIDIA runtime";
  start_manager(/*simulate=*/false);
  auto r = jobs_->submit(PeerId("p"), *parse_job_request({{"image", testing::kTestImage}, {"gpus", 1}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no NVIDIA runtime"), std::string::npos) << r.error().message();
  EXPECT_TRUE(executor_->list_owned()->empty());
  // CPU-only jobs still run.
  std::string cpu = submit("p", {{"command", {"echo", "cpu ok"}}});
  EXPECT_EQ(await_end(cpu)["exit_code"], 0);
  EXPECT_EQ(output(cpu), "cpu ok\n");
}

TEST_F(ProviderJobsTest, TheOutputHashCoversWhatAJobPrintedNotWhen) {
  start_manager();
  std::string a = submit("p", {{"command", {"sh", "-c", "echo same; echo err >&2"}}});
  std::string b = submit("p", {{"command", {"sh", "-c", "sleep 1; echo same; echo err >&2"}}});
  std::string c = submit("p", {{"command", {"sh", "-c", "echo other"}}});
  json va = await_end(a), vb = await_end(b), vc = await_end(c);
  EXPECT_EQ(va.value("output_sha256", ""), vb.value("output_sha256", "x"));
  EXPECT_NE(va.value("output_sha256", ""), vc.value("output_sha256", ""));
}

// A consumer asked for more workspace than the volume has: a sparse image
// would have been granted and the job's writes lost on a full host disk.
TEST_F(ProviderJobsTest, ADiskBeyondFreeSpaceMinusTheReserveIsRefused) {
  start_manager(true, 2, [](ProviderOptions& o) { o.limits.max_disk_mib = INT64_MAX >> 20; });
  auto space = os::volume_space(jobs_dir_);
  ASSERT_TRUE(space.ok());
  uint64_t reserve = disk_reserve(space->total_bytes, 2048ULL << 20, 5);
  int64_t too_much = static_cast<int64_t>((space->free_bytes - reserve) >> 20) + 256;
  auto big = jobs_->submit(PeerId("p"), *parse_job_request({{"image", testing::kTestImage}, {"disk_mib", too_much}}));
  ASSERT_FALSE(big.ok()) << "a " << too_much << " MiB workspace was granted with " << (space->free_bytes >> 20)
                         << " MiB free";
  EXPECT_EQ(big.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message().find("kept back for its own state"), std::string::npos) << big.error().message();
  EXPECT_NE(big.error().message().find("--disk"), std::string::npos) << big.error().message();
  EXPECT_TRUE(jobs_->list()->empty()) << "nothing was queued";
}

// Two jobs that fill their workspaces on a 256 MiB volume with a 64 MiB
// reserve: the first one's image is allocated in full, so its writes land
// in space it owns; the second waits for disk instead of eating the
// reserve, and starts once the first one's workspace is taken back.
TEST_F(ProviderJobsTest, AJobFillingItsWorkspaceCannotTakeTheStateFolderBelowItsReserve) {
  use_small_volume(256LL << 20);
  constexpr uint64_t kReserve = 64ULL << 20;
  start_manager(true, 2, [](ProviderOptions& o) {
    o.disk_reserve_bytes = kReserve;
    o.disk_reserve_percent = 100;
    o.workspace_retention = 2s;
  });
  json fill = {{"disk_mib", 120},
               {"command", {"sh", "-c", "dd if=/dev/zero of=/workspace/fill bs=1M 2>/dev/null; sync; echo filled"}}};
  std::string a = submit("p1", fill);
  std::string b = submit("p2", fill);
  json ended = await_end(a);
  EXPECT_EQ(output(a), "filled\n");
  json waiting = *jobs_->get(JobId(b));
  EXPECT_EQ(waiting.value("state", ""), "pending") << waiting.dump();
  EXPECT_EQ(waiting.value("waiting_for", "").rfind("disk:", 0), 0u) << waiting.dump();
  auto space = os::volume_space(jobs_dir_);
  ASSERT_TRUE(space.ok());
  EXPECT_GE(space->free_bytes, kReserve) << "the state folder's reserve was taken by a job";
  // a's workspace goes after its retention; then b runs and fills its own.
  json second = await_end(b);
  EXPECT_EQ(output(b), "filled\n") << second.dump();
  EXPECT_TRUE(jobs_->get(JobId(a))->contains("workspace_removed_at")) << jobs_->get(JobId(a))->dump();
  space = os::volume_space(jobs_dir_);
  ASSERT_TRUE(space.ok());
  EXPECT_GE(space->free_bytes, kReserve) << "the state folder's reserve was taken by a job";
}

// Ended jobs' workspaces do not pile up: gone after the retention, and past
// the cap the oldest fetched one goes first while an unfetched one stays.
TEST_F(ProviderJobsTest, EndedWorkspacesAreRemovedAfterRetentionAndPastTheCap) {
  start_manager(true, 4, [](ProviderOptions& o) { o.workspace_retention = 1s; });
  std::string id = submit("p", {{"command", {"true"}}});
  json ended = await_end(id);
  std::string image = jobs_dir_ + "/" + id + "/workspace.img";
  EXPECT_TRUE(testing::wait_until([&] { return jobs_->get(JobId(id))->contains("workspace_removed_at"); }))
      << jobs_->get(JobId(id))->dump();
  EXPECT_FALSE(std::filesystem::exists(image));
  EXPECT_EQ(jobs_->get(JobId(id))->value("state", ""), "exited") << "the job's record and log stay";
  jobs_->shutdown();
  jobs_.reset();

  start_manager(true, 4, [](ProviderOptions& o) {
    o.workspace_retention = 3600s;
    o.workspaces_max_bytes = 1;  // any ended workspace is over the cap
  });
  std::string fetched = submit("p", {{"command", {"true"}}});
  std::string unfetched = submit("p", {{"command", {"true"}}});
  await_end(fetched);
  await_end(unfetched);
  jobs_->outputs_fetched(JobId(fetched));
  EXPECT_TRUE(testing::wait_until([&] { return jobs_->get(JobId(fetched))->contains("workspace_removed_at"); }))
      << jobs_->get(JobId(fetched))->dump();
  EXPECT_FALSE(std::filesystem::exists(jobs_dir_ + "/" + fetched + "/workspace.img"));
  EXPECT_TRUE(std::filesystem::exists(jobs_dir_ + "/" + unfetched + "/workspace.img"))
      << "outputs nobody fetched stay until their retention";
  EXPECT_FALSE(jobs_->get(JobId(unfetched))->contains("workspace_removed_at"));
}

TEST_F(ProviderJobsTest, EndedJobsLogsAreKeptWithinTheirOwnCapOldestFirst) {
  // Each job prints 64 KiB; the cap holds about two jobs' logs.
  start_manager(true, 4, [](ProviderOptions& o) { o.logs_max_bytes = 150 << 10; });
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(submit("p", {{"command", {"sh", "-c", "head -c 65536 /dev/zero | tr '\\0' x"}}}));
    await_end(ids.back());
  }
  // The oldest go until the rest fit; the newest two stay readable.
  EXPECT_TRUE(testing::wait_until([&] { return jobs_->get(JobId(ids[1]))->contains("log_removed_at"); }))
      << jobs_->get(JobId(ids[1]))->dump();
  EXPECT_TRUE(jobs_->get(JobId(ids[0]))->contains("log_removed_at"));
  EXPECT_FALSE(std::filesystem::exists(jobs_dir_ + "/" + ids[0] + "/output.log"));
  for (int i : {2, 3}) {
    EXPECT_FALSE(jobs_->get(JobId(ids[static_cast<size_t>(i)]))->contains("log_removed_at"));
    auto read = jobs_->read_log(JobId(ids[static_cast<size_t>(i)]), 0, 1 << 20);
    ASSERT_TRUE(read.ok()) << read.error().to_string();
    EXPECT_FALSE(read->slice.records.empty());
  }
  // The record stays, and reading the removed log says why.
  EXPECT_EQ(jobs_->get(JobId(ids[0]))->value("state", ""), "exited");
  auto gone = jobs_->read_log(JobId(ids[0]), 0, 1 << 20);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message().find("jobs.logs_max_mib"), std::string::npos) << gone.error().to_string();
}

}  // namespace
}  // namespace yonder::jobs::provider
