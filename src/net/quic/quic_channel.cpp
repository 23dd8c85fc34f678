#include "net/quic/quic_channel.h"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>

#include "net/quic/quic_endpoint.h"

namespace yonder::quic {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// One sendmsg: under 64 KB of datagrams (GSO's limit is 64 segments and
// the IP datagram size).
constexpr size_t kBatchBytes = 60 * 1024;
constexpr size_t kBatchSegments = 64;
// Batches per flush before letting the receive side in (posted onward).
constexpr int kBatchesPerFlush = 16;

MonoTime now() { return std::chrono::steady_clock::now(); }
}  // namespace

QuicChannel::QuicChannel(std::shared_ptr<QuicEndpoint> endpoint, asio::any_io_executor ex)
    : endpoint_(endpoint), timer_(ex), handshake_timer_(ex), tx_buf_(kBatchBytes) {}

QuicChannel::~QuicChannel() = default;

QuicConnection::Hooks QuicChannel::hooks() {
  QuicConnection::Hooks h;
  // Raw this: the connection lives inside this channel and calls these only
  // from calls the channel makes.
  h.cid_added = [this](const std::string& cid) {
    cids_.push_back(cid);
    if (auto ep = endpoint_.lock()) ep->route(cid, shared_from_this());
  };
  h.cid_removed = [this](const std::string& cid) {
    std::erase(cids_, cid);
    if (auto ep = endpoint_.lock()) ep->unroute(cid, this);
  };
  return h;
}

PublicKeyBytes QuicChannel::peer_key() const { return conn_->peer_key().value_or(PublicKeyBytes{}); }

std::string QuicChannel::path_string() const {
  auto r = conn_->remote();
  std::string addr = r.address().is_v6() ? "[" + r.address().to_string() + "]" : r.address().to_string();
  return "punched quic " + addr + ":" + std::to_string(r.port());
}

bool QuicChannel::export_keying_material(std::string_view label, uint8_t* out, size_t size) {
  return conn_ && conn_->export_keying_material(label, out, size);
}

void QuicChannel::on_datagram(const udp::endpoint& from, ByteView data, MonoTime t) {
  if (finished_) return;
  conn_->receive(data, from, t);
}

void QuicChannel::start_handshake_timer(std::chrono::milliseconds timeout) {
  handshake_timer_.expires_after(timeout);
  std::weak_ptr<QuicChannel> weak = weak_from_this();
  handshake_timer_.async_wait([weak, timeout](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->announced_ || self->finished_) return;
    auto r = self->conn_->remote();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", static_cast<double>(timeout.count()) / 1000.0);
    // What failed, if the peer answered at all, says more than the timeout.
    if (!self->conn_->failure().empty() && self->conn_->over()) return self->finish(true);
    self->send_close();
    self->finish_reason_ = "no QUIC answer from " + r.address().to_string() + ":" + std::to_string(r.port()) +
                           " within " + secs + " s: the path is blocked";
    self->finish(true);
  });
}

void QuicChannel::after_io() {
  if (finished_) return;
  auto self = shared_from_this();  // a handler below may drop the last other reference
  if (!announced_ && conn_->confirmed()) {
    announced_ = true;
    handshake_timer_.cancel();
    auto ready = std::move(ready_);
    ready_ = nullptr;
    if (ready) ready(self);
    if (finished_) return;
  }
  deliver_read();
  flush();
  if (conn_->over()) {
    send_close();
    finish(true);
    return;
  }
  arm_timer();
}

void QuicChannel::arm_timer() {
  if (finished_) return;
  MonoTime at = conn_->expiry();
  if (timer_armed_ && at >= armed_at_) return;  // the earlier wake-up re-reads expiry
  armed_at_ = at;
  timer_armed_ = true;
  timer_.expires_at(at == MonoTime::max() ? now() + std::chrono::hours(24) : at);
  std::weak_ptr<QuicChannel> weak = weak_from_this();
  timer_.async_wait([weak](error_code ec) {
    auto self = weak.lock();
    if (!self || ec == asio::error::operation_aborted) return;
    self->timer_armed_ = false;
    if (self->finished_) return;
    if (now() >= self->conn_->expiry()) self->conn_->on_expiry(now());
    self->after_io();
  });
}

bool QuicChannel::send_pending() {
  auto ep = endpoint_.lock();
  if (!ep) {
    tx_len_ = 0;
    return true;
  }
  auto r = ep->send_batch(tx_to_, tx_buf_.data(), tx_len_, tx_segment_);
  if (r == QuicEndpoint::SendResult::kWouldBlock) {
    if (!waiting_writable_) {
      waiting_writable_ = true;
      std::weak_ptr<QuicChannel> weak = weak_from_this();
      ep->wait_writable([weak] {
        auto self = weak.lock();
        if (!self) return;
        self->waiting_writable_ = false;
        self->after_io();
      });
    }
    return false;
  }
  tx_len_ = 0;  // sent, or lost to a send error: QUIC's loss recovery resends
  return true;
}

void QuicChannel::flush() {
  if (finished_ || flushing_) return;
  flushing_ = true;
  bool more = false;
  if (tx_len_ == 0 || send_pending()) {
    int batches = 0;
    for (;;) {
      if (batches == kBatchesPerFlush) {
        more = true;
        break;
      }
      tx_len_ = conn_->write_batch(tx_buf_.data(), tx_buf_.size(), kBatchSegments, &tx_segment_, &tx_to_, now());
      if (tx_len_ == 0) break;
      ++batches;
      if (!send_pending()) break;
    }
  }
  flushing_ = false;
  // Writes whose bytes all went into packets are done.
  uint64_t sent = conn_->stream_sent();
  while (!writes_.empty() && writes_.front().end <= sent) {
    auto w = std::move(writes_.front());
    writes_.pop_front();
    asio::post(timer_.get_executor(), [done = std::move(w.done), n = w.size] { done(error_code(), n); });
  }
  if (shutting_ && !conn_->over() && conn_->stream_all_acked()) {
    send_close();
    finish(true);
    return;
  }
  if (more) {
    asio::post(timer_.get_executor(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->after_io();
    });
  }
}

void QuicChannel::send_close() {
  if (!conn_) return;
  auto ep = endpoint_.lock();
  Bytes buf(1500);
  udp::endpoint to;
  size_t n = conn_->write_close(buf.data(), buf.size(), &to, now());
  if (n > 0 && ep) ep->send_batch(to, buf.data(), n, n);
}

error_code QuicChannel::end_error() const {
  if (conn_->stream_fin_received() || conn_->closed_cleanly() || shutting_) return asio::error::eof;
  if (conn_->failure().find("idle") != std::string::npos) return asio::error::timed_out;
  return asio::error::connection_reset;
}

void QuicChannel::deliver_read() {
  if (!read_done_) return;
  size_t n = conn_->stream_read(read_buf_, read_size_);
  error_code ec;
  if (n == 0) {
    if (!conn_->stream_fin_received() && !conn_->over() && !finished_) return;  // wait
    ec = end_error();
  }
  auto done = std::move(read_done_);
  read_done_ = nullptr;
  asio::post(timer_.get_executor(), [done = std::move(done), ec, n] { done(ec, n); });
}

void QuicChannel::async_read_some(uint8_t* buffer, size_t size, IoHandler done) {
  read_buf_ = buffer;
  read_size_ = size;
  read_done_ = std::move(done);
  deliver_read();
  if (!finished_) flush();  // reading opened the flow control window
}

void QuicChannel::async_write(ByteView data, IoHandler done) {
  if (finished_ || shutting_ || conn_->over()) {
    asio::post(timer_.get_executor(), [done = std::move(done)] { done(asio::error::broken_pipe, 0); });
    return;
  }
  conn_->stream_append(data);
  writes_.push_back({conn_->stream_queued(), data.size(), std::move(done)});
  flush();
  arm_timer();
}

void QuicChannel::async_shutdown(Handler done) {
  if (finished_) {
    asio::post(timer_.get_executor(), [done = std::move(done)] { done(error_code()); });
    return;
  }
  shutting_ = true;
  shutdown_done_ = std::move(done);
  conn_->stream_finish();
  after_io();
}

void QuicChannel::close() {
  if (finished_) return;
  send_close();
  finish(false);
}

void QuicChannel::finish(bool call_handlers) {
  if (finished_) return;
  finished_ = true;
  auto self = shared_from_this();
  timer_.cancel();
  handshake_timer_.cancel();
  if (auto ep = endpoint_.lock()) {
    for (const auto& cid : cids_) ep->unroute(cid, this);
  }
  cids_.clear();
  auto ready = std::move(ready_);
  ready_ = nullptr;
  auto writes = std::move(writes_);
  writes_.clear();
  auto shutdown = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  if (!call_handlers) {
    read_done_ = nullptr;
    return;
  }
  auto ex = timer_.get_executor();
  if (ready) {
    std::string why = !finish_reason_.empty() ? finish_reason_
                      : !conn_->failure().empty() ? conn_->failure()
                                                  : std::string("the QUIC connection closed during the handshake");
    auto r = conn_->remote();
    // The timeout's text names the address already.
    std::string where = finish_reason_.empty() ? "QUIC to " + r.address().to_string() + ":" + std::to_string(r.port())
                                               : std::string();
    asio::post(ex, [ready = std::move(ready), why, where] {
      Error e = make_error(ErrorCode::kUnavailable, why);
      ready(where.empty() ? std::move(e) : std::move(e).with_context(where));
    });
  }
  deliver_read();
  error_code ec = end_error() == asio::error::eof ? asio::error::broken_pipe : end_error();
  for (auto& w : writes) asio::post(ex, [done = std::move(w.done), ec] { done(ec, 0); });
  if (shutdown) {
    error_code sec = conn_->stream_all_acked() ? error_code() : end_error();
    if (sec == asio::error::eof) sec = error_code();
    asio::post(ex, [shutdown = std::move(shutdown), sec] { shutdown(sec); });
  }
}

}  // namespace yonder::quic
