#include "exec/docker/log_frames.h"

#include <gtest/gtest.h>

namespace yonder::exec::docker {
namespace {

TEST(FrameDecoder, DecodesFramesSplitAtEveryByte) {
  std::string wire = encode_frame(LogStream::kStdout, "hello\n") + encode_frame(LogStream::kStderr, "") +
                     encode_frame(LogStream::kStderr, std::string(70000, 'e'));
  for (size_t step : {size_t{1}, size_t{3}, size_t{8}, size_t{4096}, wire.size()}) {
    FrameDecoder d;
    std::vector<std::pair<LogStream, std::string>> got;
    for (size_t i = 0; i < wire.size(); i += step) {
      ASSERT_TRUE(d.feed(std::string_view(wire).substr(i, step), [&](LogStream s, std::string_view p) {
        got.emplace_back(s, std::string(p));
      }).ok());
    }
    EXPECT_TRUE(d.at_boundary());
    ASSERT_EQ(got.size(), 3u) << step;
    EXPECT_EQ(got[0], std::make_pair(LogStream::kStdout, std::string("hello\n")));
    EXPECT_EQ(got[1].first, LogStream::kStderr);
    EXPECT_EQ(got[2].second.size(), 70000u);
  }
}

TEST(FrameDecoder, RefusesBadHeadersAndHugeFrames) {
  FrameDecoder bad_stream;
  auto noop = [](LogStream, std::string_view) {};
  EXPECT_FALSE(bad_stream.feed(std::string("\x07\0\0\0\0\0\0\x01x", 9), noop).ok());
  EXPECT_FALSE(bad_stream.feed(encode_frame(LogStream::kStdout, "ok"), noop).ok()) << "stays failed";
  FrameDecoder tty_text;
  EXPECT_FALSE(tty_text.feed("hello world, no frames here", noop).ok());
  FrameDecoder small(16);
  auto st = small.feed(std::string("\x01\0\0\0\0\0\0\x11", 8), noop);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
  FrameDecoder huge;  // a 4 GiB announcement is refused, not allocated
  EXPECT_FALSE(huge.feed(std::string("\x01\0\0\0\xff\xff\xff\xff", 8), noop).ok());
}

// What `docker logs -t` of a TTY container sends (measured on Docker 20.10):
// entries end at '\n', a line longer than 16 KiB is cut into entries of
// exactly 16 KiB, and the last entry may have no newline.
TEST(TtyLogDecoder, SplitsEntriesAtNewlinesAndAt16KiBSplitAtEveryByte) {
  const std::string t1 = "2026-11-30T03:57:34.944298071Z ", t2 = "2026-11-30T03:57:36.445443753Z ";
  std::string long_line(kTtyEntryBytes + 5, 'x');
  std::string wire = t1 + "tty\r\n" + t2 + long_line.substr(0, kTtyEntryBytes) + t2 + long_line.substr(kTtyEntryBytes) +
                     "\r\n" + t2 + "\n" + t1 + "no newline";
  for (size_t step : {size_t{1}, size_t{7}, size_t{31}, size_t{4096}, wire.size()}) {
    TtyLogDecoder d;
    std::vector<std::pair<int64_t, std::string>> got;
    auto on = [&](int64_t at, std::string_view b) { got.emplace_back(at, std::string(b)); };
    for (size_t i = 0; i < wire.size(); i += step) d.feed(std::string_view(wire).substr(i, step), on);
    EXPECT_EQ(got.size(), 4u) << step;  // the last entry waits for the end of the stream
    d.finish(on);
    ASSERT_EQ(got.size(), 5u) << step;
    EXPECT_EQ(got[0], std::make_pair(int64_t{1796011054944298071LL}, std::string("tty\r\n")));
    EXPECT_EQ(got[1].second, long_line.substr(0, kTtyEntryBytes));
    EXPECT_EQ(got[2].second, "xxxxx\r\n");
    EXPECT_EQ(got[2].first, 1796011056445443753LL);
    EXPECT_EQ(got[3].second, "\n");
    EXPECT_EQ(got[4].second, "no newline");
  }
}

TEST(TtyLogDecoder, BytesWithoutATimeAreKeptNotDropped) {
  TtyLogDecoder d;
  std::vector<std::pair<int64_t, std::string>> got;
  auto on = [&](int64_t at, std::string_view b) { got.emplace_back(at, std::string(b)); };
  d.feed("no time here\n" + std::string(3 * kTtyEntryBytes, 'y'), on);
  d.finish(on);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], std::make_pair(int64_t{0}, std::string("no time here\n")));
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(got[i].second.size(), kTtyEntryBytes);  // bounded buffering
}

TEST(Timestamps, ParsesDockerTimes) {
  auto t = parse_rfc3339_ns("2026-11-30T01:12:57.088105488Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1796001177088105488LL);
  EXPECT_EQ(*parse_rfc3339_ns("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_rfc3339_ns("1970-01-01T00:00:01.5Z"), 1'500'000'000);
  EXPECT_EQ(*parse_rfc3339_ns("0001-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_rfc3339_ns("2000-02-29T12:00:00+00:00"), 951825600LL * 1'000'000'000);
  for (const char* bad : {"", "2026-11-30", "2026-13-01T00:00:00Z", "2026-11-30T01:12:57.Z", "2026-11-30T01:12:57+02:00",
                          "2026-11-30T01:12:57.0000000001Z", "20x6-11-30T01:12:57Z"}) {
    EXPECT_FALSE(parse_rfc3339_ns(bad).ok()) << bad;
  }
  auto split = split_timestamp("2026-11-30T01:12:57.088105488Z hello world\n");
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->second, "hello world\n");
  EXPECT_FALSE(split_timestamp("no timestamp").ok());
}

}  // namespace
}  // namespace yonder::exec::docker
