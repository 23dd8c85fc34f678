// The frames of a peer link: what travels inside the TLS stream between two
// nodes, carrying many independent byte streams at once.
//
// The shape follows yamux (hashicorp/yamux, spec.md) and HTTP/2's framing
// layer (RFC 9113, sections 4-6): a fixed 12-byte header, big-endian, then a
// payload whose length is bounded per type before a byte of it is buffered.
//
//    0       1       2       3       4               8              12
//   +-------+-------+-------+-------+---------------+---------------+----
//   |version| type  |     flags     |   stream id   |    length     | payload
//   +-------+-------+-------+-------+---------------+---------------+----
//
// version is 1; flags are reserved and must be 0 (a receiver rejects others,
// so a later version can give them meaning only together with a new version).
//
//   type            stream   payload                             bound
//   0 DATA          any      the stream's bytes                  64 KiB
//   1 OPEN          != 0     u16 kind (what the stream is for)   2 bytes
//   2 CLOSE         != 0     empty: the sender's half is done    0
//   3 RESET         != 0     u32 code, reason text               4 + 256
//   4 WINDOW_UPDATE any      u32 credit increment (> 0)          4
//   5 PING          0        8 opaque bytes                      8
//   6 PONG          0        the 8 bytes of the PING it answers  8
//   7 GOAWAY        0        u32 last stream id, u32 code, text  8 + 256
//
// A short exchange, dialer (odd stream ids) on the left, acceptor (even) on
// the right; stream 0 is the session's control stream, open from the start:
//
//   DATA 0 "request"          ->                 (control stream, priority)
//   OPEN 1 kind=log-follow    ->
//                             <-  DATA 1 "line 1\n" ...  (within 256 KiB credit)
//   WINDOW_UPDATE 1 +65536    ->                 (as the reader consumes)
//   CLOSE 1                   ->                 (no more from the dialer)
//                             <-  CLOSE 1        (both halves done: stream gone)
//   PING 0 x                  ->
//                             <-  PONG 0 x
//   GOAWAY last=0 code=0      ->                 (no new streams; drain, then
//                                                 the carrier is closed)
//
// Reason texts are at most 256 bytes with no control characters (they end up
// in logs and terminals). This file only encodes and decodes single frames;
// stream states, flow control and scheduling live in net/link/mux.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::wire {

constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderSize = 12;
constexpr size_t kMaxDataPayload = 64 * 1024;
// Every non-DATA frame is far smaller than this; it bounds what a decoder
// ever buffers for one of them.
constexpr size_t kMaxControlPayload = 4 * 1024;
constexpr size_t kMaxReasonLength = 256;
// The credit each stream starts with in each direction (protocol version 1).
constexpr uint32_t kInitialWindow = 256 * 1024;

enum class FrameType : uint8_t {
  kData = 0,
  kOpen = 1,
  kClose = 2,
  kReset = 3,
  kWindowUpdate = 4,
  kPing = 5,
  kPong = 6,
  kGoAway = 7,
};

const char* frame_type_name(FrameType type);

// Stream ids: odd for streams the dialing side opened, even (non-zero) for the
// accepting side's, 0 for the control stream and session-wide frames.
struct StreamId {
  uint32_t value = 0;
  auto operator<=>(const StreamId&) const = default;
};
constexpr StreamId kControlStream{0};

// What a stream is for, so the receiver can hand it to the right handler.
// Values not listed here pass through unchanged; the application refuses
// kinds it does not know with a RESET.
enum class StreamKind : uint16_t {
  kControl = 0,  // only stream 0; OPEN with this kind is a protocol error
  kLogFollow = 1,
  kFile = 2,
  kExec = 3,
  kForward = 4,
};

// Codes carried by RESET and GOAWAY. The application may use its own values
// from kFirstApplicationCode up.
enum class ResetCode : uint32_t {
  kNoError = 0,        // a normal end (GOAWAY) or a cancel without blame
  kProtocolError = 1,  // the peer broke the framing or stream rules
  kInternalError = 2,
  kRefused = 3,        // the stream was not processed; safe to retry
  kCancel = 4,         // the application no longer wants the stream
  kFlowControl = 5,
  kTimeout = 6,
  kTooManyStreams = 7,
  kFirstApplicationCode = 0x1000,
  kPathMoved = 0x1001,  // GOAWAY: a better path to the same peer is up; finish streams here, open none
};

struct DataFrame {
  StreamId stream;
  Bytes data;
  bool operator==(const DataFrame&) const = default;
};
struct OpenFrame {
  StreamId stream;
  StreamKind kind;
  bool operator==(const OpenFrame&) const = default;
};
struct CloseFrame {
  StreamId stream;
  bool operator==(const CloseFrame&) const = default;
};
struct ResetFrame {
  StreamId stream;
  ResetCode code;
  std::string reason;
  bool operator==(const ResetFrame&) const = default;
};
struct WindowUpdateFrame {
  StreamId stream;
  uint32_t increment;
  bool operator==(const WindowUpdateFrame&) const = default;
};
using PingPayload = std::array<uint8_t, 8>;
struct PingFrame {
  PingPayload opaque;
  bool operator==(const PingFrame&) const = default;
};
struct PongFrame {
  PingPayload opaque;
  bool operator==(const PongFrame&) const = default;
};
struct GoAwayFrame {
  StreamId last_stream;  // the highest peer-opened stream the sender handles
  ResetCode code;
  std::string reason;
  bool operator==(const GoAwayFrame&) const = default;
};

using Frame = std::variant<DataFrame, OpenFrame, CloseFrame, ResetFrame, WindowUpdateFrame, PingFrame, PongFrame,
                           GoAwayFrame>;

FrameType frame_type(const Frame& frame);

// Appends the encoding of `frame` to `out`. Encoding a frame the decoder
// would reject (oversized data, a reason with control characters, a stream id
// not allowed for the type) is a broken invariant: it aborts. Reasons longer
// than kMaxReasonLength are cut rather than rejected, since they are prose.
void encode(const Frame& frame, Bytes& out);

// Appends a DATA frame straight from `data` (no DataFrame copy in between);
// data.size() must be at most kMaxDataPayload.
void encode_data(StreamId stream, ByteView data, Bytes& out);
// Appends only a DATA header; the caller appends exactly `length` bytes.
void encode_data_header(StreamId stream, size_t length, Bytes& out);

// Turns a reason into one the wire accepts: cut to kMaxReasonLength bytes,
// control characters replaced by '?'.
std::string sanitize_reason(std::string_view reason);

// Incremental decoder: bytes go in however the transport split them, whole
// frames come out. It buffers at most one header and one payload, and
// allocates for a payload only after its length has passed the bound for its
// type. After an error it stays failed: the link is unusable.
class FrameDecoder {
 public:
  // Consumes bytes from the front of `in` (advancing it) until one frame is
  // complete. Returns the frame; std::nullopt when `in` ran out first (call
  // again with more bytes; nothing is lost); or an Error (kInvalidArgument,
  // or kResourceExhausted for an oversized frame) saying what was wrong.
  Result<std::optional<Frame>> next(ByteView& in);

  // True between frames: no partial header or payload is held.
  bool idle() const { return header_len_ == 0; }
  // Total bytes consumed so far (for error messages and tests).
  uint64_t offset() const { return offset_; }

 private:
  Result<std::optional<Frame>> fail(ErrorCode code, std::string message);
  Status check_header();
  Result<Frame> parse_payload(Bytes payload) const;

  std::array<uint8_t, kHeaderSize> header_{};
  size_t header_len_ = 0;
  FrameType type_ = FrameType::kData;
  uint32_t stream_ = 0;
  uint32_t length_ = 0;
  Bytes payload_;
  uint64_t offset_ = 0;
  std::optional<Error> failed_;
};

}  // namespace yonder::wire
