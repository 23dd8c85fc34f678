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
