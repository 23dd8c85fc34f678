// The consumer's record of its jobs (jobs/consumer/consumer_jobs.h): names
// (`run --name`) and how a job is found by id, name or prefix.
#include "jobs/consumer/consumer_jobs.h"

#include <gtest/gtest.h>

#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::jobs::consumer {
namespace {

ConsumerJob job_named(const std::string& id, const std::string& name, const std::string& state, int64_t at) {
  ConsumerJob j;
  j.job_id = id;
  j.provider_id = "provider";
  j.state = state;
  j.spec = {{"request", {{"image", "img"}}}, {"provider_name", "studio"}};
  if (!name.empty()) j.spec["name"] = name;
  j.created_at = at;
  return j;
}

TEST(JobName, FollowsDockersRuleShorter) {
  for (std::string good : {std::string("a"), std::string("train-3"), std::string("run_1.b"), std::string("7up"),
                           std::string(64, 'x')}) {
    EXPECT_TRUE(check_job_name(good).ok()) << good;
  }
  for (std::string bad : {std::string(), std::string("-x"), std::string(".hidden"), std::string("a b"),
                          std::string("a/b"), std::string("caf\xc3\xa9"), std::string(65, 'x'), std::string("a\nb")}) {
    auto st = check_job_name(bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().message().find("1 to 64 letters, digits and _.-"), std::string::npos);
  }
}

TEST(ConsumerJobStore, FindsByIdThenByTheNewestOfANameThenByPrefix) {
  testing::TempDir dir;
  {
    auto db = store::Database::open(dir / "state.db");
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(store::migrate(*db).ok());
  }
  auto store = ConsumerJobStore::open(dir / "state.db");
  ASSERT_TRUE(store.ok()) << store.error().to_string();
  auto& s = **store;
  ASSERT_TRUE(s.save(job_named("aaaa1111", "train", "exited", 10)).ok());
  ASSERT_TRUE(s.save(job_named("bbbb2222", "train", "running", 20)).ok());
  ASSERT_TRUE(s.save(job_named("cccc3333", "", "running", 30)).ok());
  ASSERT_TRUE(s.save(job_named("dddd4444", "cccc", "running", 40)).ok());  // a name that is also an id's prefix

  EXPECT_EQ(s.find("aaaa1111")->job_id, "aaaa1111");
  EXPECT_EQ(s.find("train")->job_id, "bbbb2222");  // the newest of that name
  EXPECT_EQ(s.find("cccc")->job_id, "dddd4444");   // a name wins over an id's prefix, as in docker
  EXPECT_EQ(s.find("cccc3")->job_id, "cccc3333");
  EXPECT_EQ(s.find("train")->to_json().value("name", ""), "train");
  EXPECT_FALSE(s.find("cccc3333")->to_json().contains("name"));
  EXPECT_FALSE(s.find("nothing").ok());
}

}  // namespace
}  // namespace yonder::jobs::consumer
