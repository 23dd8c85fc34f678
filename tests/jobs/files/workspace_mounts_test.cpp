// WorkspaceMounts (jobs/files/workspace_mounts.h) against real loop-mounted ext4
// images: a reader that arrives after the executor unmounted a job's
// workspace still gets the job's files, not the bare folder under the mount
// (a fetch of an ended array task once "succeeded" with no files that way).
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "jobs/files/workspace_mounts.h"
#include "os/loop_mount.h"
#include "support/temp_dir.h"

namespace yonder::jobs::files {
namespace {

using yonder::testing::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class WorkspaceMountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to make and loop-mount ext4 images";
    std::filesystem::create_directories(dir_ / "jobs/j1");
    ASSERT_TRUE(os::create_ext4_image(image(), 8 << 20, 0, 0).ok());
    // What the executor does while the job runs: its own mount, and the
    // job writes its output there.
    ASSERT_TRUE(os::mount_loop(image(), workspace()).ok());
    std::ofstream(workspace() + "/square.txt") << "64\n";
  }
  std::string jobs() const { return dir_ / "jobs"; }
  std::string image() const { return dir_ / "jobs/j1/workspace.img"; }
  std::string workspace() const { return dir_ / "jobs/j1/workspace"; }
  TempDir dir_;
};

TEST_F(WorkspaceMountsTest, AReaderAfterTheExecutorUnmountedStillSeesTheFiles) {
  WorkspaceMounts mounts(jobs());
  auto first = mounts.acquire(JobId("j1"));  // while the job runs: the executor's mount
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(read_all(*first + "/square.txt"), "64\n");

  // The job ends: the executor unmounts, though the first reader holds it.
  ASSERT_TRUE(os::unmount(workspace()).ok());
  ASSERT_FALSE(os::is_mount_point(workspace()));

  auto second = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_TRUE(os::is_mount_point(workspace()));
  EXPECT_EQ(read_all(*second + "/square.txt"), "64\n");

  // Ours now: unmounted after the last user, not before.
  mounts.release(JobId("j1"));
  EXPECT_TRUE(os::is_mount_point(workspace()));
  mounts.release(JobId("j1"));
  EXPECT_FALSE(os::is_mount_point(workspace()));
}

// A process that cloned the mount table while the job ran (each container
// start does, for a moment; `ip netns exec` for its whole command) keeps the
// workspace's file system alive past the executor's unmount, the job's last
// writes still in its cache. A reader then must get that file system, not a
// second one on a new loop device reading the stale image: that read once
// brought an ended array task home with no files.
TEST_F(WorkspaceMountsTest, AFileSystemKeptAliveElsewhereIsMountedAgainNotReadStale) {
  int ready[2], hold[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(hold), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(hold[1]);
    // A private copy of the mounts: the parent's unmount does not reach it.
    bool ok = ::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    char c = ok ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(hold[0], &c, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(hold[0]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  auto let_go = [&] {
    ::close(hold[1]);
    int status = 0;
    ::waitpid(child, &status, 0);
  };
  if (c != 'y') {
    let_go();
    FAIL() << "the helper could not make its own mount namespace";
  }

  ASSERT_TRUE(os::unmount(workspace()).ok());  // the job ended
  ASSERT_FALSE(os::is_mount_point(workspace()));
  WorkspaceMounts mounts(jobs());
  auto r = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(read_all(*r + "/square.txt"), "64\n");
  mounts.release(JobId("j1"));
  EXPECT_FALSE(os::is_mount_point(workspace()));
  let_go();

  // Once the other copy is gone too, a fresh mount reads what was written.
  ASSERT_TRUE(os::mount_loop(image(), workspace()).ok());
  EXPECT_EQ(read_all(workspace() + "/square.txt"), "64\n");
  ASSERT_TRUE(os::unmount(workspace()).ok());
}

// The executor's unmount while a fetch still reads the workspace: the
// mount leaves (it once stayed for good, "cleaning up failed"), the reader
// reads on, and the next reader gets the same files.
TEST_F(WorkspaceMountsTest, AnUnmountWhileAReaderHasFilesOpenLetsTheReaderFinish) {
  WorkspaceMounts mounts(jobs());
  auto first = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  std::ifstream open_file(*first + "/square.txt");
  ASSERT_TRUE(open_file.is_open());
  auto st = os::unmount(workspace());
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_FALSE(os::is_mount_point(workspace()));
  std::string line;
  std::getline(open_file, line);
  EXPECT_EQ(line, "64");

  auto second = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(read_all(*second + "/square.txt"), "64\n");
  open_file.close();
  mounts.release(JobId("j1"));
  mounts.release(JobId("j1"));
  EXPECT_FALSE(os::is_mount_point(workspace()));
}

TEST_F(WorkspaceMountsTest, TheExecutorsMountIsLeftToTheExecutor) {
  WorkspaceMounts mounts(jobs());
  ASSERT_TRUE(mounts.acquire(JobId("j1")).ok());
  mounts.release(JobId("j1"));
  EXPECT_TRUE(os::is_mount_point(workspace()));  // not ours to unmount
  ASSERT_TRUE(os::unmount(workspace()).ok());
}

// The job ended and a fetch mounted its image (ours); then the job started
// again on this provider (a retried start, a requeue landing here), and the
// executor found the image mounted and ran the job on that mount. The
// fetch's release must not unmount it under the running job.
TEST_F(WorkspaceMountsTest, ASameProviderRequeueLeavesTheRunningJobsFilesAlone) {
  ASSERT_TRUE(os::unmount(workspace()).ok());  // the first run ended
  bool runs = false;
  WorkspaceMounts mounts(jobs(), [&](const JobId& id) { return id == JobId("j1") && runs; });
  auto fetch = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(fetch.ok()) << fetch.error().to_string();
  ASSERT_TRUE(os::is_mount_point(workspace()));
  runs = true;  // the executor started the job again on our mount
  std::ofstream(workspace() + "/second-run.txt") << "writing\n";
  mounts.release(JobId("j1"));
  EXPECT_TRUE(os::is_mount_point(workspace())) << "the running job's workspace was unmounted under it";
  EXPECT_EQ(read_all(workspace() + "/second-run.txt"), "writing\n");
  // The executor unmounts it when that run ends; a later reader mounts it again.
  ASSERT_TRUE(os::unmount(workspace()).ok());
  runs = false;
  auto later = mounts.acquire(JobId("j1"));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(read_all(*later + "/second-run.txt"), "writing\n");
  mounts.release(JobId("j1"));
  EXPECT_FALSE(os::is_mount_point(workspace()));
}

TEST_F(WorkspaceMountsTest, ARemovedWorkspaceIsNotFound) {
  ASSERT_TRUE(os::unmount(workspace()).ok());
  std::filesystem::remove(image());
  WorkspaceMounts mounts(jobs());
  auto r = mounts.acquire(JobId("j1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.error().message().find("no workspace left"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace yonder::jobs::files
