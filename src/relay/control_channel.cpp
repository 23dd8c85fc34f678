#include "relay/control_channel.h"

namespace yonder::relay {
namespace asio = boost::asio;
using boost::system::error_code;

ControlChannel::ControlChannel(std::shared_ptr<link::TlsChannel> tls) : tls_(std::move(tls)) {}

void ControlChannel::start(OnMessage on_message, OnClosed on_closed) {
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  read_next();
}

void ControlChannel::read_next() {
  if (closed_) return;
  auto self = shared_from_this();
  tls_->async_read_some(buf_.data(), buf_.size(), [this, self](error_code ec, size_t n) {
    if (closed_) return;
    if (ec) {
      finish(ec == asio::error::eof ? make_error(ErrorCode::kUnavailable, "the other side closed the connection")
                                    : make_error(ErrorCode::kUnavailable, "connection lost: " + ec.message()));
      return;
    }
    reader_.feed(ByteView(buf_.data(), n));
    for (;;) {
      auto next = reader_.next();
      if (!next) {
        finish(std::move(next).error());
        return;
      }
      if (!*next) break;
      // A copy: the owner may close the channel (dropping on_message_) in it.
      if (auto handler = on_message_) handler(std::move(**next));
      if (closed_ || closing_) return;  // the owner closed it
    }
    read_next();
  });
}

bool ControlChannel::send(const nlohmann::json& message) {
  if (closed_ || closing_) return false;
  Bytes b = link::encode_message(message);
  if (queued_.size() + b.size() > kMaxQueuedBytes) {
    close(make_error(ErrorCode::kResourceExhausted, "the other side does not read its messages"));
    return false;
  }
  queued_.insert(queued_.end(), b.begin(), b.end());
  write_next();
  return true;
}

void ControlChannel::write_next() {
  if (writing_ || closed_) return;
  if (queued_.empty()) {
    if (closing_) {
      // Everything went out: say goodbye in TLS, then close.
      auto self = shared_from_this();
      writing_ = true;
      tls_->async_shutdown([this, self](error_code) {
        writing_ = false;
        if (closing_) finish(*closing_);
      });
    }
    return;
  }
  Bytes out = std::move(queued_);
  queued_.clear();
  writing_ = true;
  auto self = shared_from_this();
  // TlsChannel encrypts `out` before returning; the handler fires once its
  // records reached the socket.
  tls_->async_write(out, [this, self](error_code ec, size_t) {
    writing_ = false;
    if (closed_) return;
    if (ec) {
      finish(make_error(ErrorCode::kUnavailable, "connection lost while sending: " + ec.message()));
      return;
    }
    write_next();
  });
}

void ControlChannel::close_after_flush(Error why) {
  if (closed_ || closing_) return;
  closing_ = std::move(why);
  close_timer_ = std::make_unique<asio::steady_timer>(tls_->socket().get_executor(), std::chrono::seconds(2));
  auto self = shared_from_this();
  close_timer_->async_wait([this, self](error_code ec) {
    if (!ec && !closed_ && closing_) finish(*closing_);
  });
  write_next();
}

void ControlChannel::close(Error why) {
  finish(std::move(why));
}

void ControlChannel::finish(Error why) {
  if (closed_) return;
  closed_ = true;
  if (close_timer_) close_timer_->cancel();
  tls_->close();
  auto on_closed = std::move(on_closed_);
  on_closed_ = nullptr;
  on_message_ = nullptr;
  if (on_closed) on_closed(why);
}

}  // namespace yonder::relay
