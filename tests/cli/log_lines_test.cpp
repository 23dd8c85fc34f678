// `yonder logs --tail` and `-t` over the provider's log records
// (cli/log_lines.h): lines that span records, interleaved streams.
#include "cli/log_lines.h"

#include <gtest/gtest.h>

namespace yonder::cli {
namespace {

std::string tail_text(const LogTail& t) {
  std::string s;
  for (const auto& l : t.lines()) s += l.stream.substr(3, 3) + ":" + l.text;
  return s;
}

TEST(LogTail, KeepsTheLastLinesOverBothStreams) {
  LogTail t(2);
  t.add("stdout", 1, "a\nb\n");
  t.add("stderr", 2, "c\n");
  t.add("stdout", 3, "d\n");
  EXPECT_EQ(tail_text(t), "err:c\nout:d\n");
}

TEST(LogTail, ALineSplitAcrossRecordsIsOneLineWithItsFirstTime) {
  LogTail t(5);
  t.add("stdout", 10, "hel");
  t.add("stderr", 11, "warn\n");
  t.add("stdout", 12, "lo\nnext");
  ASSERT_EQ(t.lines().size(), 3u);
  EXPECT_EQ(t.lines()[0].text, "hello\n");
  EXPECT_EQ(t.lines()[0].unix_ns, 10);
  EXPECT_EQ(t.lines()[2].text, "next");  // the log ends inside it: still a line
  EXPECT_EQ(t.lines()[2].unix_ns, 12);
}

TEST(LogTail, ZeroKeepsNothing) {
  LogTail t(0);
  t.add("stdout", 1, "a\nb\n");
  EXPECT_TRUE(t.lines().empty());
}

TEST(ParseTail, TakesACountOrAll) {
  EXPECT_EQ(parse_tail("3").value(), std::optional<size_t>(3));
  EXPECT_EQ(parse_tail("0").value(), std::optional<size_t>(0));
  EXPECT_EQ(parse_tail("all").value(), std::nullopt);
  for (const char* bad : {"", "-1", "3x", "ten"}) {
    auto r = parse_tail(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message().find("--tail 20"), std::string::npos) << r.error().message();
  }
}

TEST(Rfc3339Nano, IsUtcWithNanoseconds) {
  EXPECT_EQ(rfc3339_nano(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(rfc3339_nano(1'764'785'400'123'456'789), "2025-12-03T18:10:00.123456789Z");
}

TEST(LineStamper, StampsEachLineOnceHoweverTheTextIsSplit) {
  LineStamper s;
  std::string t1 = rfc3339_nano(1'000'000'000), t2 = rfc3339_nano(2'000'000'000);
  EXPECT_EQ(s.stamp("a\nb", 1'000'000'000), t1 + " a\n" + t1 + " b");
  EXPECT_EQ(s.stamp("c\nd\n", 2'000'000'000), "c\n" + t2 + " d\n");
  EXPECT_EQ(s.stamp("", 2'000'000'000), "");
}

}  // namespace
}  // namespace yonder::cli
