// The audit log on a real full disk: a small ext4 volume, loop-mounted,
// filled to the last block. An entry SQLite cannot take is kept in the
// pending journal (its space allocated while there was room) and written,
// in order, once the daemon restarts with room again.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "jobs/audit/audit_log.h"
#include "os/loop_mount.h"
#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::audit {
namespace {

class AuditFullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    vol_ = dir_ / "vol";
    ASSERT_TRUE(os::create_ext4_image(dir_ / "vol.img", 8LL << 20, 0, 0).ok());
    auto mounted = os::mount_loop(dir_ / "vol.img", vol_);
    ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
    db_path_ = vol_ + "/state.db";
    auto db = store::Database::open(db_path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(store::migrate(*db).ok());
  }
  void TearDown() override {
    if (!vol_.empty()) {
      EXPECT_TRUE(os::unmount(vol_).ok());
    }
  }
  // Writes a file until the volume has no block left.
  void fill() {
    int fd = ::open((vol_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::vector<char> block(64 * 1024, 'x');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    block.resize(512);
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    ::fsync(fd);
    ::close(fd);
  }
  testing::TempDir dir_;
  std::string vol_, db_path_;
};

TEST_F(AuditFullDisk, AnEntryTheFullDiskRefusedIsKeptAndWrittenAfterARestart) {
  auto log = AuditLog::open(db_path_);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->append(100, "peer-a", "run.submit", "job-1", {{"n", 1}}).ok());
  fill();
  // Entries large enough to need new pages: the disk refuses them.
  std::string big(48 * 1024, 'd');
  int refused = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = (*log)->append(101 + i, "peer-a", "run.end", "job-" + std::to_string(i), {{"big", big}, {"i", i}});
    if (!r) {
      ++refused;
      EXPECT_NE(r.error().to_string().find("kept"), std::string::npos) << r.error().to_string();
    }
  }
  ASSERT_GT(refused, 0) << "the full disk took every entry: the test did not fill it";
  EXPECT_EQ((*log)->pending(), static_cast<size_t>(refused));
  // The daemon stops before the disk has room again; then room comes back.
  log->reset();
  ASSERT_EQ(::unlink((vol_ + "/filler").c_str()), 0);
  auto again = AuditLog::open(db_path_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->pending(), 0u);
  auto entries = (*again)->list(10);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 4u) << "one written at once, three kept and written after the restart";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*entries)[1 + i].subject, "job-" + std::to_string(i)) << "in the order they happened";
    EXPECT_EQ((*entries)[1 + i].at, 101 + i);
  }
  auto report = (*again)->verify();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->first_bad_seq.has_value()) << report->problem;
  EXPECT_TRUE(report->gaps.empty());
}

}  // namespace
}  // namespace yonder::audit
