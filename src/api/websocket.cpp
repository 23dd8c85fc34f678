#include "api/websocket.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cctype>

#include "base/bytes.h"

namespace yonder::api::ws {

namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view websocket_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A comma-separated header (Connection, Upgrade) holds `token`, any case.
bool has_token(std::string_view header, std::string_view token) {
  std::string h = lower(header);
  std::string_view rest = h;
  for (int seen = 0; seen < 32; ++seen) {
    size_t comma = rest.find(',');
    if (websocket_trim(rest.substr(0, comma)) == token) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

bool valid_close_code(uint16_t code) {
  // 1004-1006 and 1015 are reserved for reporting, never sent (7.4.1).
  if (code >= 1000 && code <= 1014) return code != 1004 && code != 1005 && code != 1006;
  return code >= 3000 && code <= 4999;
}

}  // namespace

std::string accept_key(std::string_view client_key) {
  std::string input = std::string(client_key) + std::string(kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return base64_encode(ByteView(digest, sizeof digest));
}

bool wants_upgrade(const UpgradeHeaders& h) {
  return has_token(h.upgrade, "websocket");
}

Status check_upgrade(const UpgradeHeaders& h) {
  if (!has_token(h.connection, "upgrade")) {
    return make_error(ErrorCode::kInvalidArgument, "a WebSocket handshake needs `Connection: Upgrade`");
  }
  if (websocket_trim(h.version) != "13") {
    return make_error(ErrorCode::kInvalidArgument,
                      "only WebSocket version 13 (RFC 6455) is spoken here; send `Sec-WebSocket-Version: 13`");
  }
  auto key = base64_decode(websocket_trim(h.key));
  if (!key || key->size() != 16) {
    return make_error(ErrorCode::kInvalidArgument, "Sec-WebSocket-Key must be 16 random bytes in base64");
  }
  return ok_status();
}

std::string encode_frame(Opcode op, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 10);
  out.push_back(static_cast<char>(0x80 | static_cast<uint8_t>(op)));
  uint64_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xFF));
  } else {
    out.push_back(static_cast<char>(127));
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
  }
  out.append(payload);
  return out;
}

std::string encode_close(uint16_t code, std::string_view reason) {
  std::string payload;
  payload.push_back(static_cast<char>(code >> 8));
  payload.push_back(static_cast<char>(code & 0xFF));
  payload.append(reason.substr(0, 123));
  return encode_frame(Opcode::kClose, payload);
}

Error FrameDecoder::fail(uint16_t code, std::string message) {
  close_code_ = code;
  buffer_.clear();
  consumed_ = 0;
  return make_error(code == kCloseTooBig ? ErrorCode::kResourceExhausted : ErrorCode::kInvalidArgument,
                    "WebSocket: " + std::move(message));
}

Result<std::optional<Frame>> FrameDecoder::next() {
  if (close_code_ != 0) return make_error(ErrorCode::kFailedPrecondition, "WebSocket: the connection already failed");
  std::string_view in = std::string_view(buffer_).substr(consumed_);
  if (in.size() < 2) return std::optional<Frame>();
  auto b0 = static_cast<uint8_t>(in[0]), b1 = static_cast<uint8_t>(in[1]);
  bool fin = (b0 & 0x80) != 0;
  if ((b0 & 0x70) != 0) return fail(kCloseProtocolError, "reserved bits set, but no extension was negotiated");
  uint8_t op = b0 & 0x0F;
  bool control = (op & 0x08) != 0;
  if (op != 0 && op != 1 && op != 2 && op != 8 && op != 9 && op != 10) {
    return fail(kCloseProtocolError, "unknown opcode " + std::to_string(op));
  }
  if ((b1 & 0x80) == 0) return fail(kCloseProtocolError, "client frames must be masked (RFC 6455 section 5.1)");
  uint64_t len = b1 & 0x7F;
  size_t header = 2;
  if (control && (!fin || len > 125)) {
    return fail(kCloseProtocolError, "control frames must be unfragmented and at most 125 bytes");
  }
  if (len == 126) {
    if (in.size() < 4) return std::optional<Frame>();
    len = (uint64_t{static_cast<uint8_t>(in[2])} << 8) | static_cast<uint8_t>(in[3]);
    header = 4;
  } else if (len == 127) {
    if (in.size() < 10) return std::optional<Frame>();
    len = 0;
    for (int i = 2; i < 10; ++i) len = (len << 8) | static_cast<uint8_t>(in[i]);
    if ((len >> 63) != 0) return fail(kCloseProtocolError, "the 64-bit length has its top bit set");
    header = 10;
  }
  // Refused before the payload is buffered: the bound holds for memory too.
  if (len > max_payload_) {
    return fail(kCloseTooBig, "a " + std::to_string(len) + "-byte frame is above the limit of " +
                                  std::to_string(max_payload_) + " bytes");
  }
  if (op == 0 && !in_message_) return fail(kCloseProtocolError, "a continuation frame with no message to continue");
  if ((op == 1 || op == 2) && in_message_) {
    return fail(kCloseProtocolError, "a new data message before the fragmented one ended");
  }
  if (in.size() < header + 4 + len) return std::optional<Frame>();
  const char* mask = in.data() + header;
  Frame f;
  f.opcode = static_cast<Opcode>(op);
  f.fin = fin;
  f.payload.assign(in.substr(header + 4, static_cast<size_t>(len)));
  for (size_t i = 0; i < f.payload.size(); ++i) f.payload[i] = static_cast<char>(f.payload[i] ^ mask[i % 4]);
  consumed_ += header + 4 + static_cast<size_t>(len);
  if (consumed_ == buffer_.size() || consumed_ > 64 * 1024) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  if (!control) in_message_ = !fin;
  if (f.opcode == Opcode::kClose) {
    if (f.payload.size() == 1) return fail(kCloseProtocolError, "a close frame with a 1-byte payload");
    if (f.payload.size() >= 2) {
      f.close_code =
          static_cast<uint16_t>((static_cast<uint8_t>(f.payload[0]) << 8) | static_cast<uint8_t>(f.payload[1]));
      if (!valid_close_code(f.close_code)) {
        return fail(kCloseProtocolError,
                    "close status " + std::to_string(f.close_code) + " is not one a peer may send");
      }
    }
  }
  return std::optional<Frame>(std::move(f));
}

}  // namespace yonder::api::ws
