// The WebSocket codec (api/websocket.h) against RFC 6455's own examples and
// the violations a server must refuse.
#include "api/websocket.h"

#include <gtest/gtest.h>

#include <string>

namespace yonder::api::ws {
namespace {

// A client frame: FIN set, masked with `key`.
std::string client_frame(uint8_t op, std::string_view payload, bool fin = true, uint32_t key = 0x37fa213d) {
  std::string f;
  f.push_back(static_cast<char>((fin ? 0x80 : 0) | op));
  if (payload.size() < 126) {
    f.push_back(static_cast<char>(0x80 | payload.size()));
  } else if (payload.size() <= 0xFFFF) {
    f.push_back(static_cast<char>(0x80 | 126));
    f.push_back(static_cast<char>(payload.size() >> 8));
    f.push_back(static_cast<char>(payload.size() & 0xFF));
  } else {
    f.push_back(static_cast<char>(0x80 | 127));
    for (int s = 56; s >= 0; s -= 8) f.push_back(static_cast<char>((uint64_t{payload.size()} >> s) & 0xFF));
  }
  char mask[4] = {static_cast<char>(key >> 24), static_cast<char>(key >> 16), static_cast<char>(key >> 8),
                  static_cast<char>(key)};
  f.append(mask, 4);
  for (size_t i = 0; i < payload.size(); ++i) f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return f;
}

TEST(WebSocket, AcceptKeyMatchesTheRfcExample) {
  // RFC 6455 section 1.3.
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocket, HandshakeChecks) {
  UpgradeHeaders h{"websocket", "keep-alive, Upgrade", "dGhlIHNhbXBsZSBub25jZQ==", "13"};
  EXPECT_TRUE(wants_upgrade(h));
  EXPECT_TRUE(check_upgrade(h).ok());
  EXPECT_TRUE(wants_upgrade({"WebSocket", "", "", ""}));
  EXPECT_FALSE(wants_upgrade({"h2c", "Upgrade", "", ""}));
  UpgradeHeaders bad = h;
  bad.version = "8";
  EXPECT_FALSE(check_upgrade(bad).ok());
  bad = h;
  bad.key = "c2hvcnQ=";  // 5 bytes
  EXPECT_FALSE(check_upgrade(bad).ok());
  bad = h;
  bad.connection = "close";
  EXPECT_FALSE(check_upgrade(bad).ok());
}

TEST(WebSocket, ServerFramesAreUnmaskedWithTheShortestLength) {
  // RFC 6455 section 5.7: a single-frame unmasked text message "Hello".
  EXPECT_EQ(encode_frame(Opcode::kText, "Hello"), std::string("\x81\x05Hello", 7));
  std::string mid = encode_frame(Opcode::kText, std::string(300, 'a'));
  EXPECT_EQ(mid.substr(0, 4), std::string("\x81\x7e\x01\x2c", 4));
  EXPECT_EQ(mid.size(), 304u);
  std::string big = encode_frame(Opcode::kBinary, std::string(70000, 'a'));
  EXPECT_EQ(big.substr(0, 10), std::string("\x82\x7f\x00\x00\x00\x00\x00\x01\x11\x70", 10));
  std::string close = encode_close(kCloseNormal, std::string(200, 'x'));
  EXPECT_EQ(close.size(), 2u + 125u);  // the reason is cut to fit a control frame
  EXPECT_EQ(close.substr(0, 4), std::string("\x88\x7d\x03\xe8", 4));
}

TEST(WebSocket, DecodesMaskedFramesFedByteByByte) {
  // RFC 6455 section 5.7: a masked "Hello".
  std::string hello("\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11);
  std::string bytes = hello + client_frame(9, "ping!") +
                      client_frame(8, std::string("\x03\xe8"
                                                  "bye",
                                                  5)) +
                      client_frame(1, std::string(1000, 'z'));
  FrameDecoder d;
  std::vector<Frame> frames;
  for (char c : bytes) {
    d.feed(std::string_view(&c, 1));
    for (;;) {
      auto f = d.next();
      ASSERT_TRUE(f.ok()) << f.error().to_string();
      if (!*f) break;
      frames.push_back(**f);
    }
  }
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].opcode, Opcode::kText);
  EXPECT_EQ(frames[0].payload, "Hello");
  EXPECT_EQ(frames[1].opcode, Opcode::kPing);
  EXPECT_EQ(frames[1].payload, "ping!");
  EXPECT_EQ(frames[2].opcode, Opcode::kClose);
  EXPECT_EQ(frames[2].close_code, kCloseNormal);
  EXPECT_EQ(frames[3].payload, std::string(1000, 'z'));
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(WebSocket, FragmentedDataIsAcceptedInOrderOnly) {
  FrameDecoder d;
  d.feed(client_frame(1, "a", false) + client_frame(9, "") + client_frame(0, "b", true));
  for (int i = 0; i < 3; ++i) {
    auto f = d.next();
    ASSERT_TRUE(f.ok() && *f) << i;
  }
  FrameDecoder orphan;
  orphan.feed(client_frame(0, "b"));
  EXPECT_FALSE(orphan.next().ok());
  EXPECT_EQ(orphan.close_code(), kCloseProtocolError);
  FrameDecoder interleaved;
  interleaved.feed(client_frame(1, "a", false) + client_frame(2, "b"));
  EXPECT_TRUE(interleaved.next().ok());
  EXPECT_FALSE(interleaved.next().ok());
}

uint16_t failure(const std::string& bytes, size_t max = 1024) {
  FrameDecoder d(max);
  d.feed(bytes);
  for (int i = 0; i < 8; ++i) {
    auto f = d.next();
    if (!f.ok()) {
      EXPECT_FALSE(d.next().ok()) << "a failed decoder stays failed";
      return d.close_code();
    }
    if (!*f) break;
  }
  return 0;
}

TEST(WebSocket, RefusesWhatTheRfcForbids) {
  EXPECT_EQ(failure(std::string("\x81\x05Hello", 7)), kCloseProtocolError) << "unmasked";
  std::string rsv = client_frame(1, "x");
  rsv[0] = static_cast<char>(rsv[0] | 0x40);
  EXPECT_EQ(failure(rsv), kCloseProtocolError) << "RSV1 without an extension";
  EXPECT_EQ(failure(client_frame(3, "x")), kCloseProtocolError) << "reserved opcode";
  EXPECT_EQ(failure(client_frame(9, std::string(126, 'p'))), kCloseProtocolError) << "long ping";
  EXPECT_EQ(failure(client_frame(9, "p", false)), kCloseProtocolError) << "fragmented ping";
  EXPECT_EQ(failure(client_frame(8, "x")), kCloseProtocolError) << "1-byte close";
  EXPECT_EQ(failure(client_frame(8, std::string("\x03\xed", 2))), kCloseProtocolError) << "close 1005 is reserved";
  EXPECT_EQ(failure(client_frame(2, std::string(2000, 'b'))), kCloseTooBig);
  // A huge length is refused from the header alone, before any payload.
  std::string huge("\x82\xff\x80\xff\xff\xff\xff\xff\xff\xff", 10);
  EXPECT_EQ(failure(huge), kCloseProtocolError) << "64-bit length with the top bit";
  huge[2] = 0;
  EXPECT_EQ(failure(huge), kCloseTooBig);
  EXPECT_EQ(failure(client_frame(1, "fine")), 0);
}

}  // namespace
}  // namespace yonder::api::ws
