#include "jobs/provider/job_store.h"

#include <gtest/gtest.h>

#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::jobs::provider {
namespace {

JobStore open_store(const std::string& path) {
  auto db = store::Database::open(path);
  EXPECT_TRUE(db.ok());
  EXPECT_TRUE(store::migrate(*db).ok());
  return JobStore(std::move(*db));
}

TEST(JobStore, RoundTripsAJobWithHandleAndLeases) {
  testing::TempDir dir;
  JobStore store = open_store(dir / "state.db");
  JobRecord r;
  r.job_id = "j1";
  r.peer_id = "peer";
  r.state = JobState::kRunning;
  r.terms.request.image = "python";
  r.terms.gpus = 1;
  r.terms.wall_time_s = 60;
  r.handle = exec::TaskHandle{"docker", "j1", "cid", "/w", "/w.img", "sha256:abc"};
  r.gpu_uuids = {"GPU-0"};
  r.result = {{"started_at", 5}};
  r.created_at = 1;
  ASSERT_TRUE(store.save(r).ok());
  auto back = store.get(JobId("j1"));
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->state, JobState::kRunning);
  EXPECT_EQ((*back)->handle->task_id, "cid");
  EXPECT_EQ((*back)->handle->image_id, "sha256:abc");  // the digest the audit log reports
  EXPECT_EQ((*back)->gpu_uuids, (std::vector<std::string>{"GPU-0"}));
  EXPECT_EQ(terms_to_json((*back)->terms), terms_to_json(r.terms));
  // A second job cannot be written down with the same GPU.
  JobRecord other = r;
  other.job_id = "j2";
  auto clash = store.save(other);
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_FALSE(store.get(JobId("j2"))->has_value()) << "the whole save rolled back";
  // Finishing releases the lease.
  r.state = JobState::kExited;
  r.exit_code = 0;
  r.gpu_uuids.clear();
  ASSERT_TRUE(store.save(r).ok());
  ASSERT_TRUE(store.save(other).ok());
  auto all = store.list();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].job_id, "j1");
  EXPECT_EQ(*(*all)[0].exit_code, 0);
  ASSERT_TRUE(store.remove(JobId("j1")).ok());
  EXPECT_EQ(store.list()->size(), 1u);
}

}  // namespace
}  // namespace yonder::jobs::provider
