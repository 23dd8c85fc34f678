// The files part of the receipt's output hash (jobs/provider/workspace_digest.h):
// the files a job created or changed, by content and path only.
#include "jobs/provider/workspace_digest.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jobs/provider/job_log.h"
#include "support/temp_dir.h"

namespace yonder::jobs::provider {
namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

std::string digest_of(const std::string& root, const FileDigests& seed = {}) {
  auto t = digest_tree(root);
  EXPECT_TRUE(t.ok());
  return t.ok() ? outputs_digest(*t, seed) : "";
}

TEST(WorkspaceDigest, SameFilesSameDigestWhateverTheirTimesModesAndOrder) {
  testing::TempDir a, b;
  write(a / "out/model.bin", "weights");
  write(a / "metrics.json", "{}");
  write(b / "metrics.json", "{}");  // the other order of creation
  write(b / "out/model.bin", "weights");
  ::chmod((b / "metrics.json").c_str(), 0600);
  std::filesystem::create_directories(b / "empty/folder");  // folders are not outputs
  ::symlink("/etc/passwd", (b / "link").c_str());           // nor are links (never followed)
  EXPECT_EQ(digest_of(a.path()), digest_of(b.path()));
  EXPECT_EQ(digest_of(a.path()).size(), 64u);

  write(b / "out/model.bin", "other weights");
  EXPECT_NE(digest_of(a.path()), digest_of(b.path()));
  write(b / "out/model.bin", "weights");
  std::filesystem::rename(b / "metrics.json", b / "metrics2.json");  // same bytes, another name
  EXPECT_NE(digest_of(a.path()), digest_of(b.path()));
}

// A job's 1 TiB file that holds one block costs the provider a block of
// hashing, not 1 TiB of zeros (a job could otherwise hold its end, and
// the provider's runner, for hours); its content still counts.
TEST(WorkspaceDigest, ASparseFileIsHashedByWhatItHoldsNotByItsLength) {
  testing::TempDir a, b;
  for (const auto* root : {&a, &b}) {
    int fd = ::open((*root / "huge").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "data", 4, 1LL << 30), 4);
    ASSERT_EQ(::ftruncate(fd, 1LL << 40), 0);
    ::close(fd);
  }
  struct stat sb {};
  ASSERT_EQ(::stat((a / "huge").c_str(), &sb), 0);
  if (static_cast<uint64_t>(sb.st_blocks) * 512 >= (1ULL << 30)) GTEST_SKIP() << "this file system keeps no holes";
  std::string da = digest_of(a.path());
  EXPECT_EQ(da.size(), 64u);
  EXPECT_EQ(da, digest_of(b.path())) << "the same sparse file, the same digest";
  int fd = ::open((b / "huge").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_EQ(::pwrite(fd, "DATA", 4, 1LL << 30), 4);
  ::close(fd);
  EXPECT_NE(da, digest_of(b.path())) << "its data counts";
}

TEST(WorkspaceDigest, FilesAsUploadedAreNotOutputs) {
  testing::TempDir seed_dir, ws;
  write(seed_dir / "data/input.csv", "1,2,3");
  write(seed_dir / "train.py", "print(1)");
  auto seed = digest_tree(seed_dir.path());
  ASSERT_TRUE(seed.ok());
  EXPECT_EQ(seed->files.size(), 2u);
  EXPECT_TRUE(seed->complete);
  // The seed digests survive their file.
  ASSERT_TRUE(write_file_digests(seed_dir / "seed.json", seed->files).ok());
  auto back = read_file_digests(seed_dir / "seed.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, seed->files);
  std::ofstream(seed_dir / "bad.json") << "[1]";
  EXPECT_FALSE(read_file_digests(seed_dir / "bad.json").ok());
  EXPECT_FALSE(read_file_digests(seed_dir / "missing.json").ok());

  // Untouched upload: no outputs at all.
  write(ws / "data/input.csv", "1,2,3");
  write(ws / "train.py", "print(1)");
  EXPECT_EQ(digest_of(ws.path(), seed->files), empty_outputs_digest());
  // A created file counts; so does a changed one; a deleted one does not.
  write(ws / "result.txt", "42");
  std::string created = digest_of(ws.path(), seed->files);
  EXPECT_NE(created, empty_outputs_digest());
  testing::TempDir only;
  write(only / "result.txt", "42");
  EXPECT_EQ(created, digest_of(only.path()));  // the uploaded files add nothing
  write(ws / "train.py", "print(2)");
  EXPECT_NE(digest_of(ws.path(), seed->files), created);
  write(ws / "train.py", "print(1)");
  std::filesystem::remove(ws / "data/input.csv");
  EXPECT_EQ(digest_of(ws.path(), seed->files), created);
}

TEST(WorkspaceDigest, MissingWorkspaceIsAnError) {
  EXPECT_FALSE(digest_tree("/nonexistent/yonder/workspace").ok());
}

// The receipt's output hash: equal logs with other files differ; equal runs are equal.
TEST(WorkspaceDigest, TheOutputHashCoversLogsAndFiles) {
  testing::TempDir dir;
  auto log = JobLog::open(dir / "a.log", 1 << 20);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->append(exec::LogStream::kStdout, 1, "same\n").ok());
  testing::TempDir one, two;
  write(one / "out.txt", "A");
  write(two / "out.txt", "B");
  auto h1 = (*log)->output_sha256(digest_of(one.path())), h1_again = (*log)->output_sha256(digest_of(one.path())),
       h2 = (*log)->output_sha256(digest_of(two.path())), none = (*log)->output_sha256();
  ASSERT_TRUE(h1.ok() && h1_again.ok() && h2.ok() && none.ok());
  EXPECT_EQ(*h1, *h1_again);
  EXPECT_NE(*h1, *h2);
  EXPECT_NE(*h1, *none);
  EXPECT_EQ(*none, *(*log)->output_sha256(empty_outputs_digest()));
  EXPECT_FALSE((*log)->output_sha256("not hex").ok());
}

}  // namespace
}  // namespace yonder::jobs::provider
