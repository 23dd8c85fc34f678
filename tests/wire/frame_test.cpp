#include "wire/frame.h"

#include <gtest/gtest.h>

#include <random>

namespace yonder::wire {
namespace {

std::vector<Frame> sample_frames() {
  Bytes big(kMaxDataPayload);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  return {
      DataFrame{StreamId{1}, Bytes{'h', 'i'}},
      DataFrame{StreamId{0}, Bytes{}},
      DataFrame{StreamId{0xFFFFFFFF}, big},
      OpenFrame{StreamId{3}, StreamKind::kLogFollow},
      OpenFrame{StreamId{4}, static_cast<StreamKind>(0xBEEF)},
      CloseFrame{StreamId{7}},
      ResetFrame{StreamId{9}, ResetCode::kCancel, "user pressed ctrl-c"},
      ResetFrame{StreamId{2}, static_cast<ResetCode>(0x1234), ""},
      WindowUpdateFrame{StreamId{0}, 1},
      WindowUpdateFrame{StreamId{5}, kInitialWindow},
      PingFrame{{1, 2, 3, 4, 5, 6, 7, 8}},
      PongFrame{{8, 7, 6, 5, 4, 3, 2, 1}},
      GoAwayFrame{StreamId{41}, ResetCode::kNoError, "daemon restarting"},
  };
}

Bytes encode_all(const std::vector<Frame>& frames) {
  Bytes out;
  for (const auto& f : frames) encode(f, out);
  return out;
}

// Feeds `wire` in the given chunk sizes (cycled) and collects the frames.
std::vector<Frame> decode_chunked(const Bytes& wire, const std::vector<size_t>& chunks) {
  FrameDecoder d;
  std::vector<Frame> out;
  size_t pos = 0;
  size_t k = 0;
  while (pos < wire.size()) {
    size_t n = std::min(chunks[k++ % chunks.size()], wire.size() - pos);
    ByteView in(wire.data() + pos, n);
    pos += n;
    for (;;) {
      auto r = d.next(in);
      EXPECT_TRUE(r.ok()) << r.error().to_string();
      if (!r.ok() || !r->has_value()) break;
      out.push_back(std::move(**r));
    }
    EXPECT_TRUE(in.empty());
  }
  EXPECT_TRUE(d.idle());
  return out;
}

Error decode_error(const Bytes& wire) {
  FrameDecoder d;
  ByteView in(wire);
  for (;;) {
    auto r = d.next(in);
    if (!r.ok()) return r.error();
    if (!r->has_value() && in.empty()) return make_error(ErrorCode::kInternal, "no error");
  }
}

Bytes header(uint8_t version, uint8_t type, uint16_t flags, uint32_t stream, uint32_t length) {
  return {version,
          type,
          static_cast<uint8_t>(flags >> 8),
          static_cast<uint8_t>(flags),
          static_cast<uint8_t>(stream >> 24),
          static_cast<uint8_t>(stream >> 16),
          static_cast<uint8_t>(stream >> 8),
          static_cast<uint8_t>(stream),
          static_cast<uint8_t>(length >> 24),
          static_cast<uint8_t>(length >> 16),
          static_cast<uint8_t>(length >> 8),
          static_cast<uint8_t>(length)};
}

TEST(Frame, HeaderLayoutIsBigEndian) {
  Bytes out;
  encode(WindowUpdateFrame{StreamId{5}, 0x10000}, out);
  EXPECT_EQ(out, (Bytes{1, 4, 0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 0, 1, 0, 0}));
  out.clear();
  encode(OpenFrame{StreamId{0x01020304}, StreamKind::kForward}, out);
  EXPECT_EQ(out, (Bytes{1, 1, 0, 0, 1, 2, 3, 4, 0, 0, 0, 2, 0, 4}));
}

TEST(Frame, RoundTripsEveryType) {
  auto frames = sample_frames();
  EXPECT_EQ(decode_chunked(encode_all(frames), {1 << 20}), frames);
}

TEST(Frame, DecodesWhateverTheSplit) {
  auto frames = sample_frames();
  Bytes wire = encode_all(frames);
  EXPECT_EQ(decode_chunked(wire, {1}), frames);
  EXPECT_EQ(decode_chunked(wire, {11, 13, 1, 4096}), frames);
  // Every two-way split of the small frames (the big one makes this slow).
  std::vector<Frame> small(frames.begin() + 3, frames.end());
  Bytes small_wire = encode_all(small);
  for (size_t cut = 0; cut <= small_wire.size(); ++cut) {
    ASSERT_EQ(decode_chunked(small_wire, {cut == 0 ? small_wire.size() : cut, small_wire.size()}), small);
  }
  std::mt19937 rng(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> chunks;
    for (int i = 0; i < 16; ++i) chunks.push_back(1 + rng() % 300);
    ASSERT_EQ(decode_chunked(wire, chunks), frames);
  }
}

TEST(Frame, RejectsWrongVersionWithAClearMessage) {
  Bytes wire = header(2, 0, 0, 1, 0);
  Error e = decode_error(wire);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("version 2"), std::string::npos) << e.message();
}

TEST(Frame, RejectsUnknownTypeAndReservedFlags) {
  EXPECT_NE(decode_error(header(1, 8, 0, 0, 0)).message().find("unknown frame type 8"), std::string::npos);
  EXPECT_NE(decode_error(header(1, 0, 1, 1, 0)).message().find("reserved flags"), std::string::npos);
}

TEST(Frame, RejectsOversizedFramesBeforeTheirPayload) {
  // Only the header is fed: the bound applies before a payload byte arrives.
  Error data = decode_error(header(1, 0, 0, 1, kMaxDataPayload + 1));
  EXPECT_EQ(data.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(data.message().find("65537"), std::string::npos) << data.message();
  EXPECT_EQ(decode_error(header(1, 5, 0, 0, 9)).code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(decode_error(header(1, 3, 0, 1, 4 + kMaxReasonLength + 1)).code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(decode_error(header(1, 2, 0, 1, 1)).code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(decode_error(header(1, 0, 0, 1, 0xFFFFFFFF)).code(), ErrorCode::kResourceExhausted);
}

TEST(Frame, RejectsStreamsNotAllowedForTheType) {
  EXPECT_NE(decode_error(header(1, 5, 0, 3, 8)).message().find("PING frame not allowed on stream 3"), std::string::npos);
  EXPECT_FALSE(decode_error(header(1, 1, 0, 0, 2)).message().empty());  // OPEN 0
  EXPECT_FALSE(decode_error(header(1, 2, 0, 0, 0)).message().empty());  // CLOSE 0
  EXPECT_FALSE(decode_error(header(1, 3, 0, 0, 4)).message().empty());  // RESET 0
  EXPECT_FALSE(decode_error(header(1, 7, 0, 1, 8)).message().empty());  // GOAWAY 1
}

TEST(Frame, RejectsMalformedPayloads) {
  auto with = [](Bytes h, Bytes payload) {
    h.insert(h.end(), payload.begin(), payload.end());
    return decode_error(h).message();
  };
  EXPECT_NE(with(header(1, 4, 0, 1, 4), {0, 0, 0, 0}).find("zero increment"), std::string::npos);
  EXPECT_NE(with(header(1, 4, 0, 1, 3), {0, 0, 1}).find("too short"), std::string::npos);
  EXPECT_NE(with(header(1, 1, 0, 1, 2), {0, 0}).find("control stream"), std::string::npos);
  EXPECT_NE(with(header(1, 1, 0, 1, 1), {0}).find("too short"), std::string::npos);
  EXPECT_NE(with(header(1, 3, 0, 1, 2), {0, 0}).find("too short"), std::string::npos);
  EXPECT_NE(with(header(1, 3, 0, 1, 6), {0, 0, 0, 1, 'a', 0x1b}).find("control character"), std::string::npos);
  EXPECT_NE(with(header(1, 7, 0, 0, 9), {0, 0, 0, 0, 0, 0, 0, 0, '\n'}).find("control character"),
            std::string::npos);
  EXPECT_NE(with(header(1, 6, 0, 0, 7), {1, 2, 3, 4, 5, 6, 7}).find("too short"), std::string::npos);
}

TEST(Frame, ErrorsNameTheOffsetAndStick) {
  Bytes wire;
  encode(PingFrame{}, wire);
  Bytes bad = header(9, 0, 0, 1, 0);
  wire.insert(wire.end(), bad.begin(), bad.end());
  FrameDecoder d;
  ByteView in(wire);
  auto first = d.next(in);
  ASSERT_TRUE(first.ok() && first->has_value());
  auto second = d.next(in);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("at byte 20"), std::string::npos) << second.error().message();
  Bytes good;
  encode(PongFrame{}, good);
  ByteView again(good);
  EXPECT_FALSE(d.next(again).ok());
}

TEST(Frame, EncoderCleansReasons) {
  Bytes out;
  encode(ResetFrame{StreamId{1}, ResetCode::kCancel, std::string(1000, 'x') + "\x1b[2J"}, out);
  EXPECT_EQ(out.size(), kHeaderSize + 4 + kMaxReasonLength);
  out.clear();
  encode(GoAwayFrame{StreamId{0}, ResetCode::kNoError, "bye\n\x7f"}, out);
  ByteView in(out);
  FrameDecoder d;
  auto r = d.next(in);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.error().to_string();
  EXPECT_EQ(std::get<GoAwayFrame>(**r).reason, "bye??");
}

}  // namespace
}  // namespace yonder::wire
