// The server side of the WebSocket protocol (RFC 6455), sans-I/O: the
// opening handshake's checks and Sec-WebSocket-Accept, frames the server
// sends, and a size-bounded decoder for frames a client sends.
//
// The exchange (section 1.2): the client sends an HTTP/1.1 GET with
// `Upgrade: websocket`, `Connection: Upgrade`, `Sec-WebSocket-Version: 13`
// and a random 16-byte `Sec-WebSocket-Key` (base64); the server answers
// 101 Switching Protocols with `Sec-WebSocket-Accept: base64(SHA-1(key +
// GUID))`. Then both sides send frames (section 5.2):
//
//   byte 0: FIN | RSV1-3 | opcode      byte 1: MASK | payload length (7 bits)
//   length 126: 16-bit length follows; 127: 64-bit length follows
//   MASK set: a 4-byte masking key follows, and the payload is XORed with it
//
// Clients must mask every frame (5.1) and servers must not. Control frames
// (close, ping, pong) carry at most 125 bytes and are never fragmented. A
// close frame carries an optional 2-byte status code and a reason; the
// other side answers with a close frame and then the TCP connection ends.
//
// What Yonder needs is server -> client text messages (live job logs), so no
// extension is negotiated (RSV bits must be 0), the server never fragments,
// and client data messages are read and dropped (bounded per frame).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::api::ws {

// Close status codes (RFC 6455 section 7.4.1).
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseGoingAway = 1001;
inline constexpr uint16_t kCloseProtocolError = 1002;
inline constexpr uint16_t kCloseTooBig = 1009;
inline constexpr uint16_t kCloseInternalError = 1011;

enum class Opcode : uint8_t { kContinuation = 0, kText = 1, kBinary = 2, kClose = 8, kPing = 9, kPong = 10 };

// Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (section 4.2.2).
std::string accept_key(std::string_view client_key);

// The handshake headers of an upgrade request, as sent (untrusted).
struct UpgradeHeaders {
  std::string upgrade;     // Upgrade
  std::string connection;  // Connection
  std::string key;         // Sec-WebSocket-Key
  std::string version;     // Sec-WebSocket-Version
};

// True when the request asks for a WebSocket (Upgrade names "websocket").
bool wants_upgrade(const UpgradeHeaders& h);
// The checks of section 4.2.1 on a request that wants_upgrade: Connection
// has the "upgrade" token, version 13, a key that is 16 bytes in base64.
// kInvalidArgument with what is wrong otherwise.
Status check_upgrade(const UpgradeHeaders& h);

// One unfragmented, unmasked server frame (FIN set).
std::string encode_frame(Opcode op, std::string_view payload);
// A close frame with `code` and a reason (cut to fit 125 bytes).
std::string encode_close(uint16_t code, std::string_view reason);

struct Frame {
  Opcode opcode = Opcode::kText;
  bool fin = true;
  std::string payload;  // unmasked
  // Close frames: the status code (0 when the frame carried none).
  uint16_t close_code = 0;
};

// Decodes client frames from bytes as they arrive. Any violation (an
// unmasked frame, RSV bits, an unknown opcode, a long or fragmented control
// frame, a continuation out of place, a frame above `max_payload`) is an
// error, after which the decoder stays failed and `close_code()` says which
// status to close with (1002, or 1009 for size).
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_payload = 64 * 1024) : max_payload_(max_payload) {}

  // Appends received bytes. Buffers at most one frame's header and payload
  // beyond what next() consumed: feed in chunks and call next() until it
  // returns nullopt.
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete frame, nullopt if more bytes are needed, or an error.
  Result<std::optional<Frame>> next();
  // Bytes fed but not yet decoded.
  size_t buffered() const { return buffer_.size() - consumed_; }
  uint16_t close_code() const { return close_code_; }

 private:
  Error fail(uint16_t code, std::string message);

  size_t max_payload_;
  std::string buffer_;
  size_t consumed_ = 0;
  bool in_message_ = false;  // a fragmented data message is open
  uint16_t close_code_ = 0;  // set when failed
};

}  // namespace yonder::api::ws
