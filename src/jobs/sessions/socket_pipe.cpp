#include "jobs/sessions/socket_pipe.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <boost/asio/write.hpp>

namespace yonder::jobs::sessions {
namespace asio = boost::asio;

void SocketPipe::start(std::shared_ptr<link::Tunnel> tunnel) {
  tunnel_ = std::move(tunnel);
  std::weak_ptr<SocketPipe> weak = weak_from_this();
  link::Tunnel::Handlers h;
  h.data = [weak](Bytes b) {
    if (auto self = weak.lock()) self->write_socket(std::move(b));
  };
  h.eof = [weak] {
    auto self = weak.lock();
    if (!self) return;
    boost::system::error_code ec;
    self->socket_.shutdown(asio::socket_base::shutdown_send, ec);
    self->remote_done_ = true;
    self->maybe_done();
  };
  h.drained = [weak] {
    if (auto self = weak.lock()) self->read_socket();
  };
  h.ended = [weak](const std::string& why) {
    auto self = weak.lock();
    if (!self) return;
    spdlog::info("tunnel: connection closed by the other side: {}", why);
    self->tunnel_.reset();
    // Bytes handed to the socket before the end still go out.
    if (self->writing_) {
      self->fail_after_write_ = true;
    } else {
      self->fail();
    }
  };
  tunnel_->start(std::move(h));
  read_socket();
}

void SocketPipe::fail() {
  if (finished_) return;
  finished_ = true;
  boost::system::error_code ec;
  socket_.close(ec);
  if (tunnel_) tunnel_->reset("the connection closed");
  tunnel_.reset();
  auto done = std::move(done_);
  if (done) done(this);
}

void SocketPipe::fail_with(std::string last) {
  if (finished_) return;
  auto data = std::make_shared<std::string>(std::move(last));
  asio::async_write(socket_, asio::buffer(*data),
                    [self = shared_from_this(), data](boost::system::error_code, size_t) { self->fail(); });
}

void SocketPipe::read_socket() {
  if (finished_ || local_done_) return;
  socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
    if (self->finished_) return;
    // A reset after the last bytes (a server closing with unread input)
    // ends our half like EOF does: what it sent before still goes through,
    // as it would over plain TCP, instead of being dropped by a stream reset.
    if (ec == asio::error::eof || ec == asio::error::connection_reset) {
      self->local_done_ = true;
      if (self->tunnel_) self->tunnel_->close();
      return self->maybe_done();
    }
    if (ec || !self->tunnel_) return self->fail();
    self->from_socket_ += n;
    if (self->tunnel_->write(ByteView(self->buf_.data(), n))) self->read_socket();
    // else: drained() reads on
  });
}

void SocketPipe::write_socket(Bytes b) {
  auto data = std::make_shared<Bytes>(std::move(b));
  writing_ = true;
  asio::async_write(socket_, asio::buffer(*data),
                    [self = shared_from_this(), data](boost::system::error_code ec, size_t n) {
                      self->writing_ = false;
                      if (self->finished_) return;
                      self->to_socket_ += n;
                      if (ec || self->fail_after_write_) return self->fail();
                      if (self->tunnel_) self->tunnel_->resume();
                    });
}

void SocketPipe::maybe_done() {
  if (!local_done_ || !remote_done_ || finished_) return;
  finished_ = true;
  boost::system::error_code ec;
  socket_.close(ec);
  tunnel_.reset();  // both halves closed: dropping it resets nothing
  auto done = std::move(done_);
  if (done) done(this);
}

}  // namespace yonder::jobs::sessions
