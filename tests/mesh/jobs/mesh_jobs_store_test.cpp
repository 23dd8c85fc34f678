// Mesh jobs' pieces that need no daemon: the SQLite store of jobs
// and attempts (a migrated database in a temp dir), and the replica digest
// (mesh/jobs/mesh_replicas.h) and validator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mesh/jobs/mesh_job_store.h"
#include "mesh/jobs/mesh_replicas.h"
#include "state/node_state.h"
#include "support/temp_dir.h"

namespace yonder::mesh {
namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(MeshJobStore, AJobAndItsAttemptsRoundTripAndUpdate) {
  testing::TempDir dir;
  std::string db = dir / "state.db";
  ASSERT_TRUE(state::prepare_database(db).ok());
  auto store = mesh::MeshJobStore::open(db).value();

  mesh::MeshJobRow job;
  job.id = "0123456789abcdef0123456789abcdef";
  job.state = "running";
  job.spec = {{"job", {{"image", "img"}, {"command", {"true"}}}}, {"retries", 1}, {"replicas", 1}};
  job.created_at = 1700000000;
  ASSERT_TRUE(store->put(job).ok());
  mesh::MeshAttempt a;
  a.attempt = 1;
  a.provider_id = "node-a";
  a.provider_name = "alpha";
  a.state = "uploading";
  a.started_at = 1700000001;
  ASSERT_TRUE(store->put_attempt(job.id, a).ok());

  auto running = store->list(true).value();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].spec["retries"], 1);
  ASSERT_EQ(running[0].attempts.size(), 1u);
  EXPECT_EQ(running[0].attempts[0].state, "uploading");
  EXPECT_FALSE(running[0].attempts[0].ended());
  EXPECT_TRUE(running[0].result.is_null());

  // The attempt is lost, a second one finishes the job.
  a.job_id = "job-1";
  a.state = "lost";
  a.why = "alpha stopped answering for 60 s";
  a.ended_at = 1700000070;
  ASSERT_TRUE(store->put_attempt(job.id, a).ok());
  mesh::MeshAttempt b;
  b.attempt = 2;
  b.provider_id = "node-b";
  b.provider_name = "beta";
  b.job_id = "job-2";
  b.state = "exited";
  b.exit_code = 0;
  b.started_at = 1700000071;
  b.ended_at = 1700000090;
  ASSERT_TRUE(store->put_attempt(job.id, b).ok());
  job.state = "succeeded";
  job.result = {{"exit_code", 0}, {"job_id", "job-2"}};
  ASSERT_TRUE(store->put(job).ok());

  EXPECT_TRUE(store->list(true).value().empty());
  auto found = store->find("0123456789ab").value();  // a prefix will do
  EXPECT_EQ(found.state, "succeeded");
  EXPECT_EQ(found.result["job_id"], "job-2");
  ASSERT_EQ(found.attempts.size(), 2u);
  EXPECT_EQ(found.attempts[0].why, "alpha stopped answering for 60 s");
  EXPECT_EQ(found.attempts[0].job_id, "job-1");
  EXPECT_FALSE(found.attempts[0].exit_code.has_value());
  EXPECT_EQ(found.attempts[1].exit_code, 0);
  EXPECT_EQ(found.to_json()["attempts"][1]["provider_name"], "beta");
  EXPECT_EQ(found.created_at, 1700000000);

  auto missing = store->find("ffff");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
}

TEST(ReplicaDigest, SameAnswerSameDigestAndAnyDifferenceShows) {
  testing::TempDir dir;
  for (const char* r : {"r1", "r2"}) {
    write(dir / r + "/answer.txt", "42\n");
    write(dir / r + "/out/b.bin", "bytes");
  }
  auto d1 = mesh::replica_digest(dir / "r1", "computed\n", "", 0).value();
  auto d2 = mesh::replica_digest(dir / "r2", "computed\n", "", 0).value();
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(d1.size(), 64u);
  // Links are left out: a job cannot point the digest at the consumer's files.
  std::filesystem::create_symlink("/etc/hostname", dir / "r2/link");
  EXPECT_EQ(mesh::replica_digest(dir / "r2", "computed\n", "", 0).value(), d1);
  EXPECT_NE(mesh::replica_digest(dir / "r2", "computed\n", "", 1).value(), d1);   // exit code
  EXPECT_NE(mesh::replica_digest(dir / "r2", "computed!\n", "", 0).value(), d1);  // stdout
  EXPECT_NE(mesh::replica_digest(dir / "r2", "", "computed\n", 0).value(), d1);   // stream
  write(dir / "r2/answer.txt", "43\n");
  EXPECT_NE(mesh::replica_digest(dir / "r2", "computed\n", "", 0).value(), d1);  // a file
}

TEST(ReplicaValidator, RunsInTheReplicaFolderAndExitZeroAccepts) {
  testing::TempDir dir;
  write(dir / "r1/answer.txt", "42\n");
  EXPECT_TRUE(mesh::run_validator(dir / "r1", "grep -qx 42 answer.txt", std::chrono::seconds(10)).value());
  EXPECT_FALSE(mesh::run_validator(dir / "r1", "grep -qx 43 answer.txt", std::chrono::seconds(10)).value());
}

}  // namespace
}  // namespace yonder::mesh
