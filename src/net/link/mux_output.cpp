// Mux: what leaves it (output scheduling), its timers, and its invariants.
//
// Frames are encoded only when the carrier asks for bytes, so priority is
// decided as late as possible: a RESET or a control message queued now still
// overtakes bulk data that was written earlier but not yet taken.
#include <algorithm>

#include "net/link/mux.h"

namespace yonder::link {
namespace {

// A DATA frame smaller than this is not worth its header even when the
// carrier asked for fewer bytes; the rest waits in pending_.
constexpr size_t kMinChunk = 4096;

}  // namespace

void Mux::mark_ready(StreamId id, Stream& s) {
  if (id == wire::kControlStream || s.in_ready) return;  // stream 0 is always served first
  s.in_ready = true;
  ready_.push_back(id);
}

bool Mux::has_output() const {
  return pending_.size() > pending_pos_ || !control_out_.empty() || !control_->send.empty() || !ready_.empty();
}

void Mux::emit_data(StreamId id, Stream& s, size_t n, Bytes& out) {
  wire::encode_data_header(id, n, out);
  s.send.pop_into(out, n);
  s.send_window -= static_cast<uint32_t>(n);
  queued_data_ -= n;
}

bool Mux::schedule_one(size_t room, Bytes& out) {
  if (!control_out_.empty()) {
    out.insert(out.end(), control_out_.begin(), control_out_.end());
    control_out_.clear();
    return true;
  }
  size_t chunk = std::min({config_.chunk_size, wire::kMaxDataPayload, std::max(room, kMinChunk)});
  if (!control_->send.empty()) {
    // The control stream is not rationed by chunk_size: it goes first whole.
    emit_data(wire::kControlStream, *control_, std::min({control_->send.size(), wire::kMaxDataPayload}), out);
    return true;
  }
  if (ready_.empty()) return false;
  StreamId id = ready_.front();
  ready_.pop_front();
  Stream& s = streams_.at(id);  // removal also drops it from ready_
  s.in_ready = false;
  if (!s.send.empty()) emit_data(id, s, std::min(s.send.size(), chunk), out);
  if (!s.send.empty()) {
    mark_ready(id, s);
  } else if (s.close_requested && !s.close_sent) {
    wire::encode(wire::CloseFrame{id}, out);
    s.close_sent = true;
    maybe_remove(id);
  }
  return true;
}

size_t Mux::take_output(Bytes& out, size_t max) {
  const size_t start = out.size();
  // The rest of a frame that did not fit last time goes first.
  size_t n = std::min(max, pending_.size() - pending_pos_);
  if (n > 0) {
    auto from = pending_.begin() + static_cast<std::ptrdiff_t>(pending_pos_);
    out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(n));
    pending_pos_ += n;
    if (pending_pos_ == pending_.size()) {
      pending_.clear();
      pending_pos_ = 0;
    }
  }
  if (pending_.empty() && n < max) {
    // Encode straight into `out`: sized once, no staging copy. A frame that
    // runs past `max` is cut and its tail kept in pending_.
    out.reserve(start + std::min(max, buffered_output() + 256) + kMinChunk + wire::kHeaderSize);
    while (out.size() - start < max && schedule_one(max - (out.size() - start), out)) {
    }
    if (out.size() - start > max) {
      auto cut = out.begin() + static_cast<std::ptrdiff_t>(start + max);
      pending_.assign(cut, out.end());
      out.erase(cut, out.end());
    }
  }
  size_t taken = out.size() - start;
  if (taken > 0) notify_writable();  // the output budget has room again
  return taken;
}

Bytes Mux::take_output(size_t max) {
  Bytes out;
  take_output(out, max);
  return out;
}

void Mux::notify_writable() {
  if (blocked_.empty()) return;
  std::vector<StreamId> still;
  for (StreamId id : blocked_) {
    auto it = streams_.find(id);
    if (it == streams_.end() || !it->second.want_writable) continue;
    if (capacity(it->second) > 0) {
      it->second.want_writable = false;
      events_.emplace_back(StreamWritable{id});  // clang 14 cannot ( )-initialise an aggregate
    } else {
      still.push_back(id);
    }
  }
  blocked_.swap(still);
}

void Mux::send_ping(MonoTime now) {
  if (failure_) return;
  ++ping_counter_;
  for (int i = 0; i < 8; ++i) ping_payload_[i] = static_cast<uint8_t>(ping_counter_ >> (56 - 8 * i));
  ping_sent_at_ = now;
  last_ping_ = now;
  queue_frame(wire::PingFrame{ping_payload_});
}

MonoTime Mux::on_timer(MonoTime now) {
  if (failure_) return MonoTime::max();
  if (now - last_received_ >= config_.dead_after) {
    fail(ErrorCode::kUnavailable, ResetCode::kTimeout,
         "no bytes from the peer for " + std::to_string(config_.dead_after.count() / 1000) +
             " s; the link is dead (the peer is gone or the path dropped)");
    return MonoTime::max();
  }
  if (now - std::max(last_received_, last_ping_) >= config_.keepalive_interval) send_ping(now);
  return std::min(last_received_ + config_.dead_after,
                  std::max(last_received_, last_ping_) + config_.keepalive_interval);
}

bool Mux::is_drained() const {
  return (go_away_sent_ || go_away_received_) && stream_count() == 0 && !has_output();
}

int64_t Mux::send_window(StreamId id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? -1 : int64_t{it->second.send_window};
}

int64_t Mux::receive_window(StreamId id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? -1 : int64_t{it->second.recv_window};
}

Status Mux::check_invariants() const {
  auto broken = [](StreamId id, const std::string& what) {
    return make_error(ErrorCode::kInternal, "mux invariant broken on stream " + std::to_string(id.value) + ": " + what);
  };
  const uint64_t window = config_.initial_window;
  size_t queued = 0;
  size_t ready = 0;
  for (const auto& [id, s] : streams_) {
    if (s.send_window > window) return broken(id, "send credit above the initial window");
    if (s.send.size() > s.send_window) return broken(id, "more queued than the peer's credit");
    // Receive side: granted credit + unread bytes + read-but-unreturned
    // credit is the whole window while the peer may send, at most it after.
    uint64_t held = uint64_t{s.recv_window} + s.recv.size() + s.unacked;
    if (s.remote_closed ? held > window : held != window) return broken(id, "receive credit does not add up");
    if (s.close_sent && !s.send.empty()) return broken(id, "bytes queued after CLOSE was sent");
    if (id != wire::kControlStream && s.in_ready != (!s.send.empty() || (s.close_requested && !s.close_sent))) {
      return broken(id, "ready flag does not match the send state");
    }
    queued += s.send.size();
    ready += s.in_ready ? 1 : 0;
  }
  if (queued != queued_data_) return broken(wire::kControlStream, "queued byte counter is off");
  if (ready != ready_.size()) return broken(wire::kControlStream, "ready list does not match the streams");
  if (stream_count() > config_.max_streams) return broken(wire::kControlStream, "more streams than the limit");
  return ok_status();
}

}  // namespace yonder::link
