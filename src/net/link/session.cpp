#include "net/link/session.h"

#include <boost/asio/post.hpp>


namespace yonder::link {
namespace asio = boost::asio;

namespace {
MonoTime mono_now() { return std::chrono::steady_clock::now(); }
constexpr size_t kWriteChunk = 256 * 1024;
}  // namespace

Session::Session(std::shared_ptr<Channel> stream, Role role, PublicKeyBytes peer, KeyVerdict verdict,
                 SessionObserver* observer, std::string path, MuxConfig mux_config)
    : stream_(std::move(stream)),
      mux_(role, mono_now(), mux_config),
      peer_(peer),
      verdict_(verdict),
      observer_(observer),
      path_(std::move(path)),
      timer_(stream_->get_executor()) {}

Session::~Session() = default;

void Session::start() {
  read_some();
  arm_timer(mux_.on_timer(mono_now()));
  flush();
}

void Session::measure_rtt() {
  if (closed_) return;
  mux_.send_ping(mono_now());
  flush();
}

std::string Session::short_auth_string() {
  return link::short_auth_string(*stream_);
}

void Session::read_some() {
  if (closed_) return;
  auto self = shared_from_this();
  stream_->async_read_some(read_buf_.data(), read_buf_.size(), [this, self](boost::system::error_code ec, size_t n) {
    if (closed_) return;
    if (ec) {
      finish(ec == asio::error::eof ? (close_reason_.empty() ? "the peer closed the link" : close_reason_)
                                    : "link read failed: " + ec.message());
      return;
    }
    bytes_in_ += n;
    mux_.feed(ByteView(read_buf_.data(), n), mono_now());
    drain_events();
    if (closed_) return;
    flush();
    read_some();
  });
}

void Session::flush() {
  if (closed_ || writing_) return;
  if (draining_ && !closing_ && !in_events_ && mux_.is_drained()) {
    closing_ = true;  // the last stream on the old path ended
    if (close_reason_.empty()) close_reason_ = "moved to a better path";
  }
  if (!mux_.has_output()) {
    if (closing_ || mux_.is_dead()) {
      // Everything queued went out: end the TLS session.
      closed_ = true;
      auto self = shared_from_this();
      stream_->async_shutdown([self](boost::system::error_code) {});
      timer_.cancel();
      observer_->on_session_closed(self, close_reason_.empty() ? "link closed" : close_reason_);
    }
    return;
  }
  write_some();
}

void Session::write_some() {
  writing_ = true;
  write_buf_.clear();  // reused: no allocation per write
  mux_.take_output(write_buf_, kWriteChunk);
  auto self = shared_from_this();
  stream_->async_write(write_buf_, [this, self](boost::system::error_code ec, size_t n) {
    writing_ = false;
    if (closed_) return;
    if (ec) {
      finish("link write failed: " + ec.message());
      return;
    }
    bytes_out_ += n;
    drain_events();  // credit returned while we wrote may have freed writers
    flush();
  });
}

void Session::arm_timer(MonoTime deadline) {
  if (closed_) return;
  timer_.expires_at(deadline);
  auto self = shared_from_this();
  timer_.async_wait([this, self](boost::system::error_code ec) {
    if (ec || closed_) return;
    MonoTime next = mux_.on_timer(mono_now());
    drain_events();
    flush();
    arm_timer(next);
  });
}

void Session::drain_events() {
  auto self = shared_from_this();
  in_events_ = true;
  while (auto event = mux_.poll_event()) {
    if (auto* err = std::get_if<LinkError>(&*event)) {
      if (close_reason_.empty()) close_reason_ = err->error.to_string();
      closing_ = true;
    }
    if (auto* pong = std::get_if<PongReceived>(&*event)) rtt_ = pong->rtt;
    observer_->on_mux_event(self, std::move(*event));
    if (closed_) break;
  }
  in_events_ = false;
}

void Session::close(const std::string& reason) {
  if (closed_ || closing_) return;
  close_reason_ = reason;
  closing_ = true;
  mux_.go_away(ResetCode::kNoError, reason);
  flush();
}

void Session::drain(const std::string& reason) {
  if (closed_ || closing_ || draining_) return;
  draining_ = true;
  close_reason_ = reason;
  mux_.go_away(ResetCode::kPathMoved, reason);
  // Posted, not now: we may be inside drain_events, and events still queued
  // (a refused stream's reset) must reach the observer before the session
  // can count as drained and close.
  boost::asio::post(timer_.get_executor(), [self = shared_from_this()] { self->flush(); });
}

void Session::finish(const std::string& why) {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  stream_->close();
  observer_->on_session_closed(shared_from_this(), why);
}

}  // namespace yonder::link
