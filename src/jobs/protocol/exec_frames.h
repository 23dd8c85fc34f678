// The frames of an interactive exec session (`yonder exec`), end to end
// between the CLI and the provider; the consumer's daemon relays them
// unchanged over a tunnel stream (exec.session). Each frame is a type byte,
// a 4-byte big-endian length and the payload:
//
//   CLI -> provider:  kData (stdin bytes), kResize (rows u16, cols u16), kStdinEof
//   provider -> CLI:  kData (stdout, or the TTY's output), kStderr, kExit (exit code i32)
//
// The provider sends kExit last, then half-closes. Untrusted input both ways:
// payloads are bounded by kMaxFramePayload.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::jobs::protocol {

enum class ExecFrameType : uint8_t { kData = 0, kStderr = 1, kResize = 2, kExit = 3, kStdinEof = 4 };
inline constexpr size_t kMaxFramePayload = 1 << 20;

struct ExecFrame {
  ExecFrameType type = ExecFrameType::kData;
  std::string payload;
};

std::string encode_exec_frame(ExecFrameType type, std::string_view payload);
std::string encode_resize(int rows, int cols);
std::string encode_exit(int code);
// Parses kResize / kExit payloads.
Result<std::pair<int, int>> decode_resize(std::string_view payload);
Result<int> decode_exit(std::string_view payload);

// Reassembles frames from bytes split anywhere.
class ExecFrameReader {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame, nullopt when more bytes are needed; an error for
  // an unknown type or an oversized payload (the stream is then broken).
  Result<std::optional<ExecFrame>> next();

 private:
  std::string buffer_;
};

}  // namespace yonder::jobs::protocol
