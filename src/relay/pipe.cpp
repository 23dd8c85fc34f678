// A relay pipe: two TCP connections that presented the two tickets of one
// match. Until both are there the first waits; then each gets the status
// byte "joined" and the relay moves bytes both ways, each direction taking
// only what its sending node's budget allows, so a node over its bandwidth
// waits for tokens while every other pipe runs on. Bytes move with splice(2)
// through a kernel pipe per direction (no copy through the relay: on a
// 2-core machine the relay's copies cost about a tenth of the throughput),
// or through a user-space buffer when a tap must see them.
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>

#include "relay/server_impl.h"

namespace yonder::relay {
namespace {

// Do not wake up for less than this (or the burst, if smaller): reads of a
// few bytes at a time would cost more than they carry.
constexpr uint64_t kMinThrottledRead = 16 * 1024;

}  // namespace

Pipe::Pipe(std::shared_ptr<RelayServer::Impl> server, PipeId id, std::array<PublicKeyBytes, 2> nodes)
    : server_(std::move(server)),
      id_(id),
      nodes_(nodes),
      idle_(server_->io),
      last_activity_(std::chrono::steady_clock::now()) {}

void Pipe::attach(int side, tcp::socket socket, ConnectionSlot slot, NodeSlot node_slot) {
  End& e = ends_[side];
  if (closed_ || e.socket) std::abort();  // one ticket per side, used once (the registry says so)
  e.socket.emplace(std::move(socket));
  e.slot.emplace(std::move(slot));
  e.node_slot.emplace(std::move(node_slot));
  e.budget = server_->budget_for(nodes_[side]);
  if (ends_[0].socket && ends_[1].socket) join();
}

void Pipe::join() {
  joined_ = true;
  server_->registry.pipe_joined(id_);
  ++server_->metrics.pipes_total;
  // splice(2) moves bytes socket -> kernel pipe -> socket without copying
  // them through the relay; a tap needs them in user space.
  splice_ = !server_->tap;
  for (int side = 0; side < 2 && splice_; ++side) {
    auto kp = os::KernelPipe::create(server_->config.pipe_buffer_bytes);
    boost::system::error_code ec;
    ends_[side].socket->non_blocking(true, ec);
    if (!kp || ec) {
      splice_ = false;  // out of descriptors: copy instead
      break;
    }
    ends_[side].kernel_pipe.emplace(std::move(*kp));
  }
  if (!splice_) {
    for (End& e : ends_) {
      e.kernel_pipe.reset();
      e.buf.resize(server_->config.pipe_buffer_bytes);
    }
  }
  static const uint8_t kJoined = static_cast<uint8_t>(PipeStatus::kJoined);
  auto self = shared_from_this();
  for (int side = 0; side < 2; ++side) {
    asio::async_write(*ends_[side].socket, asio::buffer(&kJoined, 1),
                      [this, self](boost::system::error_code ec, size_t) {
                        if (closed_) return;
                        if (ec) return close(PipeStatus::kRefused, "an end went away");
                        // Copy only once both ends know: no byte overtakes a status byte.
                        if (++status_writes_ == 2) {
                          pump(0);
                          pump(1);
                          arm_idle();
                        }
                      });
  }
}

void Pipe::pump(int from) {
  if (splice_)
    pump_splice(from);
  else
    pump_copy(from);
}

std::optional<uint64_t> Pipe::budget(int from, uint64_t want) {
  End& src = ends_[from];
  TokenBucket& node = src.budget->bucket;
  TokenBucket& total = server_->total_budget;
  if (node.unlimited() && total.unlimited()) return want;
  auto now = std::chrono::steady_clock::now();
  // The read fits both the node's budget and the relay's (an unlimited one
  // is always available).
  uint64_t min_read = kMinThrottledRead;
  if (!node.unlimited()) min_read = std::min(min_read, static_cast<uint64_t>(node.burst()));
  if (!total.unlimited()) min_read = std::min(min_read, static_cast<uint64_t>(total.burst()));
  min_read = std::max<uint64_t>(min_read, 1);
  uint64_t available = std::min(node.available(now), total.available(now));
  if (available >= min_read) return std::min(want, available);
  ++server_->metrics.throttled_total;
  if (!src.throttle) src.throttle = std::make_unique<asio::steady_timer>(server_->io);
  src.throttle->expires_after(std::max(node.wait_for(min_read, now), total.wait_for(min_read, now)));
  auto self = shared_from_this();
  src.throttle->async_wait([this, self, from](boost::system::error_code ec) {
    if (!ec && !closed_) pump(from);
  });
  return std::nullopt;
}

void Pipe::finish_direction(int from) {
  // Half-close: pass the end of this direction on, keep the other.
  ends_[from].read_done = true;
  boost::system::error_code ignored;
  ends_[1 - from].socket->shutdown(tcp::socket::shutdown_send, ignored);
  if (ends_[1 - from].read_done) close(PipeStatus::kRefused, "both ends finished");
}

void Pipe::pump_copy(int from) {
  if (closed_) return;
  End& src = ends_[from];
  if (src.read_done) return;
  auto want = budget(from, src.buf.size());
  if (!want) return;
  auto self = shared_from_this();
  src.socket->async_read_some(asio::buffer(src.buf.data(), *want),
                              [this, self, from](boost::system::error_code ec, size_t n) {
                                if (closed_) return;
                                End& s = ends_[from];
                                End& d = ends_[1 - from];
                                if (n > 0) {
                                  s.budget->bucket.consume(n);
                                  server_->total_budget.consume(n);
                                  if (!server_->charge_month(n)) return;  // the cap closed the pipe
                                  s.bytes += n;
                                  server_->metrics.bytes_relayed_total += n;
                                  last_activity_ = std::chrono::steady_clock::now();
                                  if (server_->tap) server_->tap(nodes_[from], ByteView(s.buf.data(), n));
                                  asio::async_write(*d.socket, asio::buffer(s.buf.data(), n),
                                                    [this, self, from](boost::system::error_code wec, size_t) {
                                                      if (closed_) return;
                                                      if (wec) return close(PipeStatus::kRefused, "an end went away");
                                                      pump_copy(from);
                                                    });
                                  return;
                                }
                                if (ec == asio::error::eof) return finish_direction(from);
                                close(PipeStatus::kRefused, "an end went away");
                              });
}

// Moves what it can without blocking, then waits for the socket that
// stopped it. Hands the loop back after kYieldAfter bytes so one fast pipe
// never starves the relay's other connections.
void Pipe::pump_splice(int from) {
  constexpr size_t kYieldAfter = 4 << 20;
  if (closed_) return;
  End& s = ends_[from];
  End& d = ends_[1 - from];
  if (s.read_done) return;
  os::KernelPipe& kp = *s.kernel_pipe;
  int src = s.socket->native_handle();
  int dst = d.socket->native_handle();
  auto self = shared_from_this();
  size_t moved = 0;
  for (;;) {
    if (kp.buffered() > 0) {
      ssize_t n = kp.drain_to(dst, kp.buffered());
      if (n > 0) continue;
      if (n < 0 && errno == EAGAIN) {
        d.socket->async_wait(tcp::socket::wait_write, [this, self, from](boost::system::error_code ec) {
          if (closed_) return;
          if (ec) return close(PipeStatus::kRefused, "an end went away");
          pump_splice(from);
        });
        return;
      }
      return close(PipeStatus::kRefused, "an end went away");
    }
    if (s.eof) return finish_direction(from);
    if (moved >= kYieldAfter) {
      asio::post(server_->io, [this, self, from] { pump_splice(from); });
      return;
    }
    auto want = budget(from, kp.capacity());
    if (!want) return;
    ssize_t n = kp.fill_from(src, *want);
    if (n > 0) {
      auto got = static_cast<uint64_t>(n);
      s.budget->bucket.consume(got);
      server_->total_budget.consume(got);
      if (!server_->charge_month(got)) return;  // the cap closed the pipe
      s.bytes += got;
      server_->metrics.bytes_relayed_total += got;
      last_activity_ = std::chrono::steady_clock::now();
      moved += got;
      continue;
    }
    if (n == 0) {
      s.eof = true;
      continue;
    }
    if (errno == EAGAIN) {
      s.socket->async_wait(tcp::socket::wait_read, [this, self, from](boost::system::error_code ec) {
        if (closed_) return;
        if (ec) return close(PipeStatus::kRefused, "an end went away");
        pump_splice(from);
      });
      return;
    }
    return close(PipeStatus::kRefused, "an end went away");
  }
}

void Pipe::arm_idle() {
  auto self = shared_from_this();
  idle_.expires_at(last_activity_ + server_->config.pipe_idle_timeout);
  idle_.async_wait([this, self](boost::system::error_code ec) {
    if (ec || closed_) return;
    if (std::chrono::steady_clock::now() - last_activity_ >= server_->config.pipe_idle_timeout) {
      server_->metrics.refused(Reason::kIdleTimeout);
      close(PipeStatus::kRefused, "idle");
      return;
    }
    arm_idle();
  });
}

void Pipe::close(PipeStatus status, const char* why) {
  if (closed_) return;
  closed_ = true;
  idle_.cancel();
  auto self = shared_from_this();
  for (End& e : ends_) {
    if (e.throttle) e.throttle->cancel();
    // The node's slots go now, not when the last handler lets go.
    e.node_slot.reset();
    e.kernel_pipe.reset();
    if (!e.socket) continue;
    if (!joined_) {
      // The waiting end learns why before its socket closes.
      struct Leaving {
        tcp::socket socket;
        std::optional<ConnectionSlot> slot;
        uint8_t status;
      };
      auto leaving =
          std::make_shared<Leaving>(Leaving{std::move(*e.socket), std::move(e.slot), static_cast<uint8_t>(status)});
      e.slot.reset();
      asio::async_write(leaving->socket, asio::buffer(&leaving->status, 1),
                        [leaving](boost::system::error_code, size_t) {
                          boost::system::error_code ignored;
                          leaving->socket.shutdown(tcp::socket::shutdown_both, ignored);
                          leaving->socket.close(ignored);
                        });
      continue;
    }
    boost::system::error_code ignored;
    e.socket->close(ignored);
    e.slot.reset();
  }
  if (joined_) {
    spdlog::info("relay: pipe {} closed ({}): {} <-> {}, {} + {} bytes", id_, why, NodeId(nodes_[0]).short_form(),
                 NodeId(nodes_[1]).short_form(), ends_[0].bytes, ends_[1].bytes);
  }
  server_->pipe_closed(id_);
}

}  // namespace yonder::relay
