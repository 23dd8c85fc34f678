// Application messages on a link's streams: each is a 4-byte big-endian
// length followed by that many bytes of JSON (an object with a "type" or
// "method" field). Used on the control stream (hello, pairing) and on RPC
// streams (one request, one reply). Bulk bytes never travel this way.
//
// Untrusted input: a message is at most kMaxMessageBytes, and the reader
// buffers at most one message; anything larger kills the stream.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::link {

constexpr size_t kMaxMessageBytes = 256 * 1024;

Bytes encode_message(const nlohmann::json& message);

class MessageReader {
 public:
  // Appends received bytes (any split).
  void feed(ByteView in);
  // The next complete message, std::nullopt when more bytes are needed, or an
  // error (oversized, not JSON, not an object). After an error it stays failed.
  Result<std::optional<nlohmann::json>> next();
  size_t buffered() const { return buffer_.size(); }

 private:
  Bytes buffer_;
  std::optional<Error> failed_;
};

}  // namespace yonder::link
