// Mux: received frames and the application's calls. Output scheduling,
// timers and invariants are in mux_output.cpp.
#include "net/link/mux.h"

#include <algorithm>

namespace yonder::link {
namespace {

std::string stream_name(StreamId id) { return "stream " + std::to_string(id.value); }

}  // namespace

Mux::Mux(Role role, MonoTime now, MuxConfig config)
    : role_(role),
      config_(config),
      next_local_id_(role == Role::kDialer ? 1 : 2),
      last_received_(now),
      last_ping_(now) {
  Stream& control = streams_[wire::kControlStream];
  control.send_window = config_.initial_window;
  control.recv_window = config_.initial_window;
  control_ = &control;
}

bool Mux::is_local(StreamId id) const {
  if (id.value == 0) return false;
  return (id.value % 2 == 1) == (role_ == Role::kDialer);
}

void Mux::feed(ByteView in, MonoTime now) {
  if (failure_) return;
  if (!in.empty()) last_received_ = now;
  while (!in.empty() && !failure_) {
    auto frame = decoder_.next(in);
    if (!frame) {
      fail(frame.error().code(), ResetCode::kProtocolError, "peer sent a bad frame: " + frame.error().message());
      break;
    }
    if (!frame->has_value()) break;  // `in` is used up mid-frame
    peer_seen_ = true;
    handle(std::move(**frame), now);
  }
  notify_writable();
}

void Mux::handle(wire::Frame&& frame, MonoTime now) {
  switch (wire::frame_type(frame)) {
    case wire::FrameType::kData: return on_data(std::get<wire::DataFrame>(std::move(frame)));
    case wire::FrameType::kOpen: return on_open(std::get<wire::OpenFrame>(frame));
    case wire::FrameType::kClose: return on_close(std::get<wire::CloseFrame>(frame).stream);
    case wire::FrameType::kReset: return on_reset(std::get<wire::ResetFrame>(std::move(frame)));
    case wire::FrameType::kWindowUpdate: return on_window_update(std::get<wire::WindowUpdateFrame>(frame));
    case wire::FrameType::kPing: return queue_reply(wire::PongFrame{std::get<wire::PingFrame>(frame).opaque});
    case wire::FrameType::kPong:
      // Only the latest PING is timed; an answer to an older one is ignored.
      if (ping_sent_at_ && std::get<wire::PongFrame>(frame).opaque == ping_payload_) {
        events_.push_back(PongReceived{now - *ping_sent_at_});
        ping_sent_at_.reset();
      }
      return;
    case wire::FrameType::kGoAway: return on_go_away(std::get<wire::GoAwayFrame>(std::move(frame)));
  }
}

Mux::Stream* Mux::stream_for_peer_frame(StreamId id, wire::FrameType type) {
  auto it = streams_.find(id);
  if (it != streams_.end()) return &it->second;
  // Frames for a stream that has ended (reset, or closed both ways) may still
  // be in flight; they are dropped. A stream never opened is a peer bug.
  bool ended = is_local(id) ? id.value < next_local_id_ : id.value <= last_peer_id_;
  if (!ended) {
    fail(ErrorCode::kInvalidArgument, ResetCode::kProtocolError,
         std::string("peer sent ") + wire::frame_type_name(type) + " on " + stream_name(id) +
             ", which was never opened");
  }
  return nullptr;
}

void Mux::on_data(wire::DataFrame&& f) {
  Stream* s = stream_for_peer_frame(f.stream, wire::FrameType::kData);
  if (!s) return;
  if (s->remote_closed) {
    return fail(ErrorCode::kInvalidArgument, ResetCode::kProtocolError,
                "peer sent DATA on " + stream_name(f.stream) + " after closing it");
  }
  if (f.data.size() > s->recv_window) {
    return fail(ErrorCode::kInvalidArgument, ResetCode::kFlowControl,
                "peer sent " + std::to_string(f.data.size()) + " bytes on " + stream_name(f.stream) +
                    " beyond its credit of " + std::to_string(s->recv_window));
  }
  if (f.data.empty()) return;
  s->recv_window -= static_cast<uint32_t>(f.data.size());
  bool was_empty = s->recv.empty();
  s->recv.push(std::move(f.data));
  if (was_empty) events_.push_back(DataAvailable{f.stream});
}

void Mux::on_open(const wire::OpenFrame& f) {
  if (is_local(f.stream) || f.stream.value <= last_peer_id_) {
    return fail(ErrorCode::kInvalidArgument, ResetCode::kProtocolError,
                "peer opened " + stream_name(f.stream) + ", an id it may not use (wrong parity or not increasing)");
  }
  last_peer_id_ = f.stream.value;
  if (f.stream.value > peer_id_limit_) {
    return queue_reply(wire::ResetFrame{f.stream, ResetCode::kRefused, "link is going away"});
  }
  if (stream_count() >= config_.max_streams) {
    return queue_reply(wire::ResetFrame{f.stream, ResetCode::kTooManyStreams,
                                        "too many streams (limit " + std::to_string(config_.max_streams) + ")"});
  }
  Stream& s = streams_[f.stream];
  s.kind = f.kind;
  s.send_window = config_.initial_window;
  s.recv_window = config_.initial_window;
  events_.push_back(StreamOpened{f.stream, f.kind});
}

void Mux::on_close(StreamId id) {
  Stream* s = stream_for_peer_frame(id, wire::FrameType::kClose);
  if (!s) return;
  if (s->remote_closed) {
    return fail(ErrorCode::kInvalidArgument, ResetCode::kProtocolError, "peer closed " + stream_name(id) + " twice");
  }
  s->remote_closed = true;
  events_.push_back(StreamClosed{id});
  maybe_remove(id);
}

void Mux::on_reset(wire::ResetFrame&& f) {
  if (!stream_for_peer_frame(f.stream, wire::FrameType::kReset)) return;
  events_.push_back(StreamReset{f.stream, f.code, std::move(f.reason)});
  remove_stream(f.stream);
}

void Mux::on_window_update(const wire::WindowUpdateFrame& f) {
  Stream* s = stream_for_peer_frame(f.stream, wire::FrameType::kWindowUpdate);
  if (!s) return;
  // The peer can only return credit we used, so the sum stays within the
  // initial window; more means its accounting is broken.
  if (uint64_t{s->send_window} + f.increment > config_.initial_window) {
    return fail(ErrorCode::kInvalidArgument, ResetCode::kFlowControl,
                "peer granted credit beyond the initial window on " + stream_name(f.stream));
  }
  s->send_window += f.increment;
  if (s->want_writable && capacity(*s) > 0) {
    s->want_writable = false;
    events_.push_back(StreamWritable{f.stream});
  }
}

void Mux::on_go_away(wire::GoAwayFrame&& f) {
  go_away_received_ = true;
  events_.push_back(GoAwayReceived{f.last_stream, f.code, f.reason});
  // Our streams above the peer's last one were not and will not be handled:
  // the application may retry them on another link.
  std::vector<StreamId> refused;
  for (const auto& [id, s] : streams_) {
    if (is_local(id) && id.value > f.last_stream.value) refused.push_back(id);
  }
  for (StreamId id : refused) {
    events_.push_back(StreamReset{id, ResetCode::kRefused, "peer is going away; the stream was not handled"});
    remove_stream(id);
  }
}

void Mux::fail(ErrorCode code, ResetCode wire_code, std::string message) {
  if (failure_) return;
  failure_ = make_error(code, std::move(message));
  events_.push_back(LinkError{*failure_});
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = it->first == wire::kControlStream ? std::next(it) : streams_.erase(it);
  }
  control_->send.clear();
  control_->recv.clear();
  control_->recv_window = config_.initial_window;  // nothing more will be read
  control_->unacked = 0;
  ready_.clear();
  blocked_.clear();
  queued_data_ = 0;
  // Best effort: tell the peer why before the owner closes the carrier.
  queue_frame(wire::GoAwayFrame{StreamId{last_peer_id_}, wire_code, failure_->message()});
}

void Mux::queue_frame(const wire::Frame& frame) { wire::encode(frame, control_out_); }

void Mux::queue_reply(const wire::Frame& frame) {
  if (control_out_.size() >= config_.max_control_backlog) {
    return fail(ErrorCode::kResourceExhausted, ResetCode::kProtocolError,
                "peer provokes control frames faster than it reads them");
  }
  queue_frame(frame);
}

void Mux::remove_stream(StreamId id) {
  auto it = streams_.find(id);
  if (it == streams_.end() || id == wire::kControlStream) return;
  queued_data_ -= it->second.send.size();
  if (it->second.in_ready) ready_.erase(std::find(ready_.begin(), ready_.end(), id));
  streams_.erase(it);
}

void Mux::maybe_remove(StreamId id) {
  auto it = streams_.find(id);
  if (it == streams_.end() || id == wire::kControlStream) return;
  const Stream& s = it->second;
  if (s.close_sent && s.remote_closed && s.recv.empty()) remove_stream(id);
}

Result<StreamId> Mux::open_stream(StreamKind kind) {
  if (failure_) return *failure_;
  if (kind == StreamKind::kControl) {
    return make_error(ErrorCode::kInvalidArgument, "stream 0 is the only control stream");
  }
  if (go_away_sent_ || go_away_received_) {
    return make_error(ErrorCode::kFailedPrecondition, "the link is closing (GOAWAY); open the stream on a new link");
  }
  if (stream_count() >= config_.max_streams) {
    return make_error(ErrorCode::kResourceExhausted,
                      "too many streams on this link (limit " + std::to_string(config_.max_streams) + ")");
  }
  if (next_local_id_ > UINT32_MAX - 2) {
    return make_error(ErrorCode::kResourceExhausted, "stream ids on this link are used up; reconnect");
  }
  StreamId id{next_local_id_};
  next_local_id_ += 2;
  Stream& s = streams_[id];
  s.kind = kind;
  s.send_window = config_.initial_window;
  s.recv_window = config_.initial_window;
  queue_frame(wire::OpenFrame{id, kind});
  return id;
}

Result<size_t> Mux::write(StreamId id, ByteView data) {
  if (failure_) return *failure_;
  auto it = streams_.find(id);
  if (it == streams_.end()) return make_error(ErrorCode::kNotFound, stream_name(id) + " is not open");
  Stream& s = it->second;
  if (s.close_requested) {
    return make_error(ErrorCode::kFailedPrecondition, stream_name(id) + " was closed for writing");
  }
  size_t n = std::min(data.size(), capacity(s));
  if (n > 0) {
    s.send.append(data.first(n));
    queued_data_ += n;
    mark_ready(id, s);
  }
  if (n < data.size() && !s.want_writable) {
    s.want_writable = true;
    blocked_.push_back(id);
  }
  return n;
}

size_t Mux::writable(StreamId id) const {
  auto it = streams_.find(id);
  if (failure_ || it == streams_.end()) return 0;
  return capacity(it->second);
}

size_t Mux::capacity(const Stream& s) const {
  if (s.close_requested) return 0;
  size_t credit = s.send_window - s.send.size();
  size_t budget = config_.max_buffered_output > buffered_output() ? config_.max_buffered_output - buffered_output() : 0;
  return std::min(credit, budget);
}

Bytes Mux::read(StreamId id, size_t max) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return {};
  Stream& s = it->second;
  Bytes out = s.recv.pop(max);
  // Credit goes back in batches of a quarter window: fewer frames, and the
  // sender still has three quarters to keep going meanwhile. A closed
  // sender needs none.
  if (!out.empty() && !s.remote_closed) {
    s.unacked += static_cast<uint32_t>(out.size());
    if (s.unacked >= std::max<uint32_t>(1, config_.initial_window / 4)) {
      queue_frame(wire::WindowUpdateFrame{id, s.unacked});
      s.recv_window += s.unacked;
      s.unacked = 0;
    }
  }
  maybe_remove(id);
  return out;
}

size_t Mux::readable(StreamId id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? 0 : it->second.recv.size();
}

Status Mux::close(StreamId id) {
  if (failure_) return *failure_;
  if (id == wire::kControlStream) {
    return make_error(ErrorCode::kInvalidArgument, "the control stream ends with the session; use go_away");
  }
  auto it = streams_.find(id);
  if (it == streams_.end()) return make_error(ErrorCode::kNotFound, stream_name(id) + " is not open");
  Stream& s = it->second;
  if (s.close_requested) return ok_status();
  s.close_requested = true;
  s.want_writable = false;
  mark_ready(id, s);
  return ok_status();
}

Status Mux::reset(StreamId id, ResetCode code, std::string_view reason) {
  if (failure_) return *failure_;
  if (id == wire::kControlStream) {
    return make_error(ErrorCode::kInvalidArgument, "the control stream ends with the session; use go_away");
  }
  if (!streams_.count(id)) return make_error(ErrorCode::kNotFound, stream_name(id) + " is not open");
  queue_frame(wire::ResetFrame{id, code, wire::sanitize_reason(reason)});
  remove_stream(id);
  notify_writable();  // its buffered bytes no longer count against the budget
  return ok_status();
}

void Mux::go_away(ResetCode code, std::string_view reason) {
  if (failure_ || go_away_sent_) return;
  go_away_sent_ = true;
  peer_id_limit_ = last_peer_id_;
  queue_frame(wire::GoAwayFrame{StreamId{last_peer_id_}, code, wire::sanitize_reason(reason)});
}

std::optional<MuxEvent> Mux::poll_event() {
  if (events_.empty()) return std::nullopt;
  MuxEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

}  // namespace yonder::link
