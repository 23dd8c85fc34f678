#include "jobs/provider/job_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "support/temp_dir.h"

namespace yonder::jobs::provider {
namespace {

using exec::LogStream;

TEST(JobLog, ReadsFromAnyReturnedOffset) {
  testing::TempDir dir;
  auto log = JobLog::open(dir / "out.log", 1 << 20);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(*(*log)->append(LogStream::kStdout, 10, "one\n"));
  ASSERT_TRUE(*(*log)->append(LogStream::kStderr, 20, "two\n"));
  ASSERT_TRUE(*(*log)->append(LogStream::kStdout, 30, "three\n"));
  auto first = (*log)->read(0, 5);  // a small budget still returns one whole record
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->records.size(), 1u);
  EXPECT_EQ(first->records[0].data, "one\n");
  auto rest = (*log)->read(first->next_offset, 1 << 20);
  ASSERT_EQ(rest->records.size(), 2u);
  EXPECT_EQ(rest->records[0].stream, LogStream::kStderr);
  EXPECT_EQ(rest->records[1].unix_ns, 30);
  EXPECT_EQ(rest->next_offset, (*log)->size());
  EXPECT_TRUE((*log)->read(rest->next_offset, 100)->records.empty());
  EXPECT_FALSE((*log)->read((*log)->size() + 1, 100).ok());
  auto mid = (*log)->read(3, 100);
  EXPECT_FALSE(mid.ok()) << "an offset inside a record is refused";
}

TEST(JobLog, IsBoundedWithANotice) {
  testing::TempDir dir;
  auto log = JobLog::open(dir / "out.log", 200);
  ASSERT_TRUE(log.ok());
  std::string line(50, 'x');
  int kept = 0;
  while (*(*log)->append(LogStream::kStdout, 1, line)) ++kept;
  EXPECT_EQ(kept, 3);  // 3 * (16 + 50) = 198
  EXPECT_TRUE((*log)->truncated());
  EXPECT_FALSE(*(*log)->append(LogStream::kStdout, 1, "more"));
  auto all = (*log)->read(0, 1 << 20);
  ASSERT_EQ(all->records.size(), 4u);
  EXPECT_EQ(all->records.back().stream, LogStream::kSystem);
  EXPECT_NE(all->records.back().data.find("jobs.log_max_bytes"), std::string::npos);
}

TEST(JobLog, ReopenCutsATornTailAndRemembersTheLastTime) {
  testing::TempDir dir;
  std::string path = dir / "out.log";
  {
    auto log = JobLog::open(path, 1 << 20);
    ASSERT_TRUE(*(*log)->append(LogStream::kStdout, 111, "a\n"));
    ASSERT_TRUE(*(*log)->append(LogStream::kStdout, 222, "b\n"));
  }
  uint64_t whole = 2 * (kLogRecordHeader + 2);
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << std::string("\x01\0\0\0\0\0\0\x09partial", 15);  // a crash mid-write
  }
  auto log = JobLog::open(path, 1 << 20);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->size(), whole);
  EXPECT_EQ((*log)->last_unix_ns(), 222);
  ASSERT_TRUE(*(*log)->append(LogStream::kStdout, 333, "c\n"));
  EXPECT_EQ((*log)->read(0, 1 << 20)->records.size(), 3u);
}

// The metering receipt's output hash: what each stream printed, not how
// the engine chunked or interleaved it, nor when.
TEST(JobLog, OutputHashIgnoresChunkingInterleavingAndTimes) {
  testing::TempDir dir;
  auto a = JobLog::open(dir / "a.log", 1 << 20);
  auto b = JobLog::open(dir / "b.log", 1 << 20);
  auto c = JobLog::open(dir / "c.log", 1 << 20);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE((*a)->append(exec::LogStream::kStdout, 1, "hello world\n").ok());
  ASSERT_TRUE((*a)->append(exec::LogStream::kStderr, 2, "warn\n").ok());
  ASSERT_TRUE((*b)->append(exec::LogStream::kStderr, 7, "warn\n").ok());
  ASSERT_TRUE((*b)->append(exec::LogStream::kStdout, 8, "hello ").ok());
  ASSERT_TRUE((*b)->append(exec::LogStream::kSystem, 9, "a provider notice").ok());
  ASSERT_TRUE((*b)->append(exec::LogStream::kStdout, 9, "world\n").ok());
  ASSERT_TRUE((*c)->append(exec::LogStream::kStdout, 1, "hello world\nwarn\n").ok());  // stderr's bytes on stdout
  auto ha = (*a)->output_sha256(), hb = (*b)->output_sha256(), hc = (*c)->output_sha256();
  ASSERT_TRUE(ha.ok() && hb.ok() && hc.ok());
  EXPECT_EQ(ha->size(), 64u);
  EXPECT_EQ(*ha, *hb);
  EXPECT_NE(*ha, *hc);
}

TEST(JobLog, DecoderRefusesGarbage) {
  size_t used = 0;
  EXPECT_FALSE(decode_log_records(std::string(16, '\x09'), &used).ok());
  auto partial = decode_log_records(encode_log_record(LogStream::kStdout, 1, "abc").substr(0, 17), &used);
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE(partial->empty());
  EXPECT_EQ(used, 0u);
}

}  // namespace
}  // namespace yonder::jobs::provider
