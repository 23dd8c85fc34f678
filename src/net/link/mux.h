// The stream multiplexer of a peer link: many independent, flow-controlled
// byte streams over one ordered, reliable carrier (a TLS stream, a QUIC
// stream or a relay pipe). Frames are wire/frame.h's.
//
// Sans-I/O (after ZeroTier's node/ and libtorrent's DHT): a Mux never touches
// a socket, a clock or a thread. The owner feeds it received bytes with the
// time they arrived, takes bytes to write when the carrier can take them,
// drains events after each call, and calls on_timer() by the deadline it
// returns. One Mux per side of a link; not thread-safe (the event loop owns it).
//
// The rules, after yamux and HTTP/2 (RFC 9113 sections 5 and 6.9):
// - Stream ids: the dialer opens odd ids, the acceptor even ones, each side in
//   increasing order. Stream 0, the control stream, is open from the start on
//   both sides and lives as long as the session; it carries the application's
//   control messages and is sent before any other stream's data.
// - Each stream half-closes on its own (CLOSE after the last byte); a stream
//   is gone once both halves are closed and its received bytes were read, or
//   at once when either side resets it.
// - Flow control per stream: each direction starts with kInitialWindow bytes
//   of credit. The receiver returns credit (WINDOW_UPDATE) as the application
//   reads, not as bytes arrive, so a slow reader stalls only its own stream.
//   A sender that exceeds its credit, or credit beyond the initial window, is
//   a protocol error. write() queues no more than the credit, so a stream's
//   send buffer is bounded by the window, and all streams together by
//   MuxConfig::max_buffered_output.
// - Output order: session frames (RESET, WINDOW_UPDATE, PING, PONG, GOAWAY,
//   OPEN) first, then control stream data, then the other streams round-robin
//   in chunks of MuxConfig::chunk_size, so no stream starves another.
// - Keepalive: a PING after keepalive_interval without any received byte; the
//   link is dead after dead_after without one.
// - Any protocol error kills the session: a LinkError event, a GOAWAY with the
//   reason queued as a courtesy, and every later call is refused.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "net/link/byte_queue.h"
#include "wire/frame.h"

namespace yonder::link {

using wire::ResetCode;
using wire::StreamId;
using wire::StreamKind;
using MonoTime = std::chrono::steady_clock::time_point;
using Millis = std::chrono::milliseconds;

enum class Role { kDialer, kAcceptor };

struct MuxConfig {
  // Both sides must use the same value; wire protocol version 1 fixes 256 KiB.
  uint32_t initial_window = wire::kInitialWindow;
  // Streams alive at once (both sides' together, not counting stream 0); the
  // peer's extras are refused with RESET kTooManyStreams. With the window,
  // this bounds what a peer can make us buffer: 128 x 256 KiB = 32 MiB.
  size_t max_streams = 128;
  // App bytes queued in all send buffers plus encoded bytes not yet taken.
  size_t max_buffered_output = 4 * 1024 * 1024;
  // Session frames waiting to be taken; more means the peer provokes replies
  // (PONGs, refusals) faster than it reads them, and the session is failed.
  size_t max_control_backlog = 256 * 1024;
  // Round-robin quantum: the most a stream sends before the next one's turn.
  size_t chunk_size = 16 * 1024;
  Millis keepalive_interval{15'000};
  Millis dead_after{45'000};
};

// Events, drained with poll_event() after every call that may raise them.
struct StreamOpened {  // the peer opened a stream
  StreamId id;
  StreamKind kind;
};
// A stream's receive buffer went from empty to not: read() until it returns
// nothing; there is no further DataAvailable for that stream until then.
struct DataAvailable {
  StreamId id;
};
// The peer sent its last byte (remote half-close). Bytes before it may
// still be waiting in read(); our half stays open until close().
struct StreamClosed {
  StreamId id;
};
struct StreamReset {  // the peer reset the stream, or it was refused
  StreamId id;
  ResetCode code;
  std::string reason;
};
struct StreamWritable {  // credit returned after write() accepted less than offered
  StreamId id;
};
struct PongReceived {
  std::chrono::nanoseconds rtt;
};
struct GoAwayReceived {
  StreamId last_stream;
  ResetCode code;
  std::string reason;
};
struct LinkError {  // the session is dead; close the carrier after taking output
  Error error;
};
using MuxEvent = std::variant<StreamOpened, DataAvailable, StreamClosed, StreamReset, StreamWritable, PongReceived,
                              GoAwayReceived, LinkError>;

class Mux {
 public:
  Mux(Role role, MonoTime now, MuxConfig config = {});

  // --- carrier side ---
  // Consumes received bytes, split anywhere. A protocol error raises LinkError.
  void feed(ByteView in, MonoTime now);
  // True when take_output() would return bytes.
  bool has_output() const;
  // Up to `max` bytes to write to the carrier, highest priority first.
  Bytes take_output(size_t max);
  // The same, appended to `out`; returns how many. A write loop that reuses
  // one buffer this way allocates nothing per call.
  size_t take_output(Bytes& out, size_t max);
  // Sends keepalive PINGs and declares the link dead; returns when to call
  // again (the next keepalive or death deadline).
  MonoTime on_timer(MonoTime now);

  // --- application side ---
  // Opens a stream; the peer learns of it with the first output.
  Result<StreamId> open_stream(StreamKind kind);
  // Queues up to data.size() bytes within the stream's credit and the output
  // budget; returns how many were taken. After a short write, StreamWritable
  // says when to try again. Errors: unknown, closed or reset stream; dead link.
  Result<size_t> write(StreamId id, ByteView data);
  // How many bytes write() would take now.
  size_t writable(StreamId id) const;
  // Up to `max` received bytes, in order; empty when none are buffered.
  // Returns credit to the peer as it goes.
  Bytes read(StreamId id, size_t max = SIZE_MAX);
  size_t readable(StreamId id) const;
  // Half-closes: CLOSE goes out after the bytes already queued.
  Status close(StreamId id);
  // Abandons the stream both ways, dropping what is buffered.
  Status reset(StreamId id, ResetCode code, std::string_view reason);
  // Sends a PING now; PongReceived reports the round trip.
  void send_ping(MonoTime now);
  // Refuses new streams from now on and tells the peer the last stream of
  // its that will be handled; existing streams finish normally.
  void go_away(ResetCode code, std::string_view reason);

  std::optional<MuxEvent> poll_event();

  // --- state ---
  Role role() const { return role_; }
  // A valid frame from the peer has arrived (the link counts as established
  // only then: a TLS 1.3 client may finish its handshake before the server
  // has checked its certificate).
  bool peer_seen() const { return peer_seen_; }
  bool is_dead() const { return failure_.has_value(); }
  const std::optional<Error>& failure() const { return failure_; }
  // A GOAWAY went either way, no stream is left and all output was taken:
  // the owner may close the carrier.
  bool is_drained() const;
  size_t stream_count() const { return streams_.size() - 1; }
  bool has_stream(StreamId id) const { return streams_.count(id) != 0; }
  // Credit the peer has granted on a stream, and credit this side has
  // granted (for invariant checks in tests and fuzzers); -1 if unknown.
  int64_t send_window(StreamId id) const;
  int64_t receive_window(StreamId id) const;
  // Bytes held for output: send buffers plus encoded, not yet taken.
  size_t buffered_output() const { return queued_data_ + control_out_.size() + pending_.size() - pending_pos_; }
  // Checks the accounting (credit within [0, initial window], buffers within
  // credit, byte counters consistent); for tests and fuzzers.
  Status check_invariants() const;

 private:
  struct Stream {
    StreamKind kind = StreamKind::kControl;
    // Sending half.
    ByteQueue send;
    uint32_t send_window = 0;  // peer credit not yet used by encoded DATA
    bool close_requested = false;
    bool close_sent = false;
    bool want_writable = false;
    bool in_ready = false;  // in ready_ (has queued bytes or a CLOSE to send)
    // Receiving half.
    ByteQueue recv;
    uint32_t recv_window = 0;  // credit granted and not yet used by the peer
    uint32_t unacked = 0;      // bytes read by the app, credit not yet returned
    bool remote_closed = false;
  };

  void handle(wire::Frame&& frame, MonoTime now);
  void on_data(wire::DataFrame&& f);
  void on_open(const wire::OpenFrame& f);
  void on_close(StreamId id);
  void on_reset(wire::ResetFrame&& f);
  void on_window_update(const wire::WindowUpdateFrame& f);
  void on_go_away(wire::GoAwayFrame&& f);
  // The stream a peer frame names: the live one, nullptr for a closed one
  // (the frame is ignored), or a protocol error for one never opened.
  Stream* stream_for_peer_frame(StreamId id, wire::FrameType type);
  bool is_local(StreamId id) const;
  void fail(ErrorCode code, ResetCode wire_code, std::string message);
  void queue_frame(const wire::Frame& frame);
  // A frame the peer provoked (PONG, a refusal): bounded by the backlog.
  void queue_reply(const wire::Frame& frame);
  void emit_data(StreamId id, Stream& s, size_t n, Bytes& out);
  void remove_stream(StreamId id);
  void maybe_remove(StreamId id);
  void mark_ready(StreamId id, Stream& s);
  void notify_writable();
  size_t capacity(const Stream& s) const;
  bool schedule_one(size_t room, Bytes& out);

  Role role_;
  MuxConfig config_;
  wire::FrameDecoder decoder_;
  std::map<StreamId, Stream> streams_;
  Stream* control_;  // streams_[0]; map nodes do not move
  std::deque<StreamId> ready_;   // bulk streams with something to send
  Bytes control_out_;            // encoded session frames, sent first
  Bytes pending_;                // the tail of a frame cut by take_output's max
  size_t pending_pos_ = 0;
  size_t queued_data_ = 0;       // app bytes in all send buffers
  std::deque<MuxEvent> events_;
  std::vector<StreamId> blocked_;  // streams waiting for StreamWritable
  uint32_t next_local_id_;
  uint32_t last_peer_id_ = 0;      // highest stream id the peer opened
  uint32_t peer_id_limit_ = UINT32_MAX;  // after we sent GOAWAY: refuse above
  bool go_away_sent_ = false;
  bool go_away_received_ = false;
  bool peer_seen_ = false;
  MonoTime last_received_;
  MonoTime last_ping_;
  std::optional<MonoTime> ping_sent_at_;
  uint64_t ping_counter_ = 0;
  wire::PingPayload ping_payload_{};
  std::optional<Error> failure_;
};

}  // namespace yonder::link
