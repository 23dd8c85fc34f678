// Docker's multiplexed stream format (attach, logs and exec without a TTY).
// Each frame is an 8-byte header followed by the payload:
//
//   byte 0     stream: 0 stdin, 1 stdout, 2 stderr, 3 system error
//   bytes 1-3  zero
//   bytes 4-7  payload length, big-endian uint32
//
// (moby/moby pkg/stdcopy). With `timestamps=1` each payload starts with an
// RFC 3339 time with nanoseconds and a space. Both are untrusted input:
// frames are bounded (a header announcing more than max_frame bytes is an
// error, not an allocation) and the decoder is fuzzed (fuzz/docker_log_frames_fuzz.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "exec/executor.h"

namespace yonder::exec::docker {

constexpr size_t kFrameHeaderBytes = 8;
constexpr size_t kDefaultMaxFrame = 1 << 20;  // Docker splits log lines at 16 KiB

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame = kDefaultMaxFrame) : max_frame_(max_frame) {}

  using OnFrame = std::function<void(LogStream, std::string_view payload)>;
  // Consumes `bytes`, calling on_frame for each complete frame. After an
  // error the decoder stays failed (the stream is out of sync).
  Status feed(std::string_view bytes, const OnFrame& on_frame);
  // True when no partial frame is buffered (a clean end of stream).
  bool at_boundary() const { return buffer_.empty(); }

 private:
  size_t max_frame_;
  std::string buffer_;
  bool failed_ = false;
};

// The log stream of a container with a TTY (Config.Tty): no frames, one
// stream. With `timestamps=1` it is a run of entries "TIME SP bytes", where
// an entry ends with its '\n', or is exactly kTtyEntryBytes bytes of a
// longer line (Docker's log copier cuts lines there: daemon/logger/copier.go),
// or is what is left when the stream ends (finish()). Untrusted like the
// frames: the buffer never holds more than one entry's bound, and bytes
// without a readable time are delivered with time 0 rather than dropped.
// Fuzzed with the frame decoder.
inline constexpr size_t kTtyEntryBytes = 16 * 1024;

class TtyLogDecoder {
 public:
  using OnEntry = std::function<void(int64_t unix_ns, std::string_view bytes)>;
  void feed(std::string_view bytes, const OnEntry& on_entry);
  // The end of the stream: delivers a last entry that has no newline.
  void finish(const OnEntry& on_entry);

 private:
  // Delivers the entries that are complete; with `at_end`, the rest too.
  void drain(bool at_end, const OnEntry& on_entry);
  std::string buffer_;
};

// Builds one frame (tests, and the provider's persisted log uses the same header).
std::string encode_frame(LogStream stream, std::string_view payload);

// Splits "2026-11-30T01:12:57.088105488Z payload" into unix nanoseconds and
// the payload. kInvalidArgument when the prefix is not such a time.
Result<std::pair<int64_t, std::string_view>> split_timestamp(std::string_view line);

// Parses an RFC 3339 UTC time ("...Z" or "+00:00") with up to 9 fraction
// digits into unix nanoseconds; Docker's zero time "0001-01-01T00:00:00Z" gives 0.
Result<int64_t> parse_rfc3339_ns(std::string_view text);

}  // namespace yonder::exec::docker
