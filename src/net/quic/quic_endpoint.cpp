#include "net/quic/quic_endpoint.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103  // linux/udp.h; older libc headers lack it
#endif
#ifndef UDP_GRO
#define UDP_GRO 104  // linux/udp.h
#endif

namespace yonder::quic {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr size_t kMaxDatagram = 65536;
constexpr int kDatagramsPerWake = 64;
// Routing entries (a few per connection) beyond which new Initials are
// dropped: a flood of handshakes cannot grow the table without bound.
constexpr size_t kMaxRoutes = 4096;
// Source addresses whose handshake budget is remembered; past it the table
// starts again (a spoofing flood then costs itself its memory, not ours).
constexpr size_t kMaxHandshakeSources = 1024;

bool kernel_has_gso(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  return getsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &v, &len) == 0;
}

// Asks the kernel to hand over runs of same-sized datagrams from one sender
// as one buffer (UDP GRO, Linux 5.0): one system call for up to 64 KiB of
// packets instead of one per 1.2 KiB packet. The size of each datagram but
// the last comes with it (a UDP_GRO control message).
bool enable_gro(int fd) {
  int on = 1;
  return setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on) == 0;
}
}  // namespace

QuicEndpoint::QuicEndpoint(udp::socket socket, std::shared_ptr<QuicCredentials> creds, QuicConfig config)
    : socket_(std::move(socket)), creds_(std::move(creds)), config_(config), rx_(kMaxDatagram) {}

QuicEndpoint::~QuicEndpoint() { close(); }

Result<std::shared_ptr<QuicEndpoint>> QuicEndpoint::bind(asio::any_io_executor ex, const Identity& identity,
                                                        const udp::endpoint& local, QuicConfig config) {
  udp::socket socket(ex);
  error_code ec;
  socket.open(local.protocol(), ec);
  if (!ec) socket.bind(local, ec);
  if (ec) {
    return make_error(ErrorCode::kUnavailable, "cannot bind the QUIC UDP socket to " + local.address().to_string() +
                                                   ":" + std::to_string(local.port()) + ": " + ec.message() +
                                                   "; pick another port or free this one");
  }
  return adopt(std::move(socket), identity, config);
}

Result<std::shared_ptr<QuicEndpoint>> QuicEndpoint::adopt(udp::socket socket, const Identity& identity,
                                                         QuicConfig config) {
  auto creds = make_credentials(identity);
  if (!creds) return std::move(creds).error();
  error_code ec;
  socket.non_blocking(true, ec);
  if (ec || !socket.is_open()) {
    return make_error(ErrorCode::kInvalidArgument, "the socket handed to the QUIC endpoint is not an open UDP socket");
  }
  // Room for bursts: the kernel caps these at net.core.{r,w}mem_max.
  socket.set_option(asio::socket_base::receive_buffer_size(4 * 1024 * 1024), ec);
  socket.set_option(asio::socket_base::send_buffer_size(4 * 1024 * 1024), ec);
  std::shared_ptr<QuicEndpoint> ep(new QuicEndpoint(std::move(socket), std::move(*creds), config));
  ep->local_ = ep->socket_.local_endpoint(ec);
  if (ec) return make_error(ErrorCode::kInvalidArgument, "the socket handed to the QUIC endpoint is not bound");
  ep->gso_ = config.gso && kernel_has_gso(ep->socket_.native_handle());
  ep->gro_ = config.gso && enable_gro(ep->socket_.native_handle());
  ep->start();
  return ep;
}

void QuicEndpoint::start() { receive_some(); }

void QuicEndpoint::receive_some() {
  if (closed_) return;
  std::weak_ptr<QuicEndpoint> weak = weak_from_this();
  socket_.async_wait(udp::socket::wait_read, [weak](error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->closed_) return;
    std::vector<std::shared_ptr<QuicChannel>> touched;
    for (int i = 0; i < kDatagramsPerWake && !self->closed_; ++i) {
      size_t segment = 0;
      ssize_t n = self->receive_batch(&segment);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) continue;  // an ICMP error for an earlier send, and the like
      ++self->stats_.batches_in;
      auto len = static_cast<size_t>(n);
      if (segment == 0 || segment >= len) segment = len;
      // A coalesced run: every datagram has `segment` bytes but the last.
      for (size_t off = 0; off < len && !self->closed_; off += segment) {
        self->handle(self->rx_from_, ByteView(self->rx_.data() + off, std::min(segment, len - off)), touched);
      }
    }
    for (auto& ch : touched) ch->after_io();
    self->receive_some();
  });
}

// One recvmsg: a datagram, or with GRO a run of them (their size in
// *segment, 0 when the kernel did not coalesce). -1 with errno on failure.
ssize_t QuicEndpoint::receive_batch(size_t* segment) {
  iovec iov{rx_.data(), rx_.size()};
  msghdr msg{};
  msg.msg_name = rx_from_.data();
  msg.msg_namelen = static_cast<socklen_t>(rx_from_.capacity());
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (gro_) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  ssize_t n;
  do {
    n = ::recvmsg(socket_.native_handle(), &msg, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  if (msg.msg_namelen > rx_from_.capacity()) {  // cannot happen for our own family; resize would throw
    errno = EINVAL;
    return -1;
  }
  rx_from_.resize(msg.msg_namelen);
  *segment = 0;
  for (cmsghdr* cm = gro_ ? CMSG_FIRSTHDR(&msg) : nullptr; cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO && cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(cm), sizeof size);
      if (size > 0) *segment = static_cast<size_t>(size);
    }
  }
  return n;
}

void QuicEndpoint::handle(const udp::endpoint& from, ByteView data,
                          std::vector<std::shared_ptr<QuicChannel>>& touched) {
  if (!looks_like_quic(data)) {
    ++stats_.other_in;
    if (other_) other_(from, data);
    return;
  }
  ++stats_.datagrams_in;
  if (config_.drop_every_nth_received != 0 && ++quic_in_ % config_.drop_every_nth_received == 0) {
    ++stats_.dropped_in;
    return;
  }
  DatagramHeader h = decode_header(data);
  if (h.dcid.empty()) {
    ++stats_.dropped_in;
    return;
  }
  auto it = routes_.find(h.dcid);
  if (it != routes_.end()) {
    auto ch = it->second;
    ch->on_datagram(from, data, std::chrono::steady_clock::now());
    if (std::find(touched.begin(), touched.end(), ch) == touched.end()) touched.push_back(ch);
    return;
  }
  if (!h.initial || !on_channel_ || routes_.size() >= kMaxRoutes) {
    ++stats_.dropped_in;
    return;
  }
  // A new handshake: within the source's budget, before any crypto work.
  std::string source = from.address().to_string();
  auto budget = handshake_budget_.find(source);
  auto now = std::chrono::steady_clock::now();
  if (budget == handshake_budget_.end()) {
    if (handshake_budget_.size() >= kMaxHandshakeSources) handshake_budget_.clear();
    double per_second = 1000.0 / static_cast<double>(kHandshakeInterval.count());
    budget = handshake_budget_.emplace(source, TokenBucket(per_second, kHandshakeBurst, now)).first;
  }
  if (!budget->second.take(now)) {
    ++stats_.handshakes_limited;
    ++stats_.dropped_in;
    return;
  }
  std::shared_ptr<QuicChannel> ch(new QuicChannel(shared_from_this(), socket_.get_executor()));
  auto conn = QuicConnection::server(creds_, accept_key_, local_, from, data, config_, ch->hooks(),
                                     std::chrono::steady_clock::now());
  if (!conn) {
    // Routes the hooks added point at a channel that never was: remove them.
    for (const auto& cid : ch->cids_) unroute(cid, ch.get());
    ++stats_.dropped_in;
    return;
  }
  ch->conn_ = std::move(*conn);
  std::weak_ptr<QuicEndpoint> weak = weak_from_this();
  ch->ready_ = [weak](Result<std::shared_ptr<QuicChannel>> r) {
    auto self = weak.lock();
    if (!self || !r || !self->on_channel_) return;
    auto channel = *r;
    self->on_channel_(channel, channel->peer_key());
  };
  ch->start_handshake_timer(config_.connect_timeout);
  touched.push_back(ch);
}

void QuicEndpoint::inject_datagram(const udp::endpoint& from, ByteView data) {
  if (closed_) return;
  std::vector<std::shared_ptr<QuicChannel>> touched;
  handle(from, data, touched);
  for (auto& ch : touched) ch->after_io();
}

void QuicEndpoint::unroute(const std::string& cid, const QuicChannel* channel) {
  auto it = routes_.find(cid);
  if (it != routes_.end() && it->second.get() == channel) routes_.erase(it);
}

void QuicEndpoint::connect(const udp::endpoint& remote, const PublicKeyBytes& expected_peer, QuicChannel::Ready done) {
  auto fail = [&](std::string why) {
    asio::post(socket_.get_executor(), [done = std::move(done), why = std::move(why)] {
      done(make_error(ErrorCode::kUnavailable, why));
    });
  };
  if (closed_) return fail("the QUIC endpoint is closed");
  if (remote.protocol() != local_.protocol()) {
    return fail("cannot reach " + remote.address().to_string() + " from a QUIC socket of the other IP family");
  }
  std::shared_ptr<QuicChannel> ch(new QuicChannel(shared_from_this(), socket_.get_executor()));
  auto conn = QuicConnection::client(creds_, expected_peer, local_, remote, config_, ch->hooks(),
                                     std::chrono::steady_clock::now());
  if (!conn) {
    for (const auto& cid : ch->cids_) unroute(cid, ch.get());
    return fail(conn.error().to_string());
  }
  ch->conn_ = std::move(*conn);
  ch->ready_ = std::move(done);
  ch->start_handshake_timer(config_.connect_timeout);
  ch->after_io();  // the Initial leaves now
}

void QuicEndpoint::listen(AcceptKey accept_key, OnChannel on_channel) {
  accept_key_ = std::move(accept_key);
  on_channel_ = std::move(on_channel);
}

void QuicEndpoint::close() {
  if (closed_) return;
  closed_ = true;
  std::vector<std::shared_ptr<QuicChannel>> all;
  for (auto& [cid, ch] : routes_) {
    if (std::find(all.begin(), all.end(), ch) == all.end()) all.push_back(ch);
  }
  for (auto& ch : all) {
    ch->send_close();
    ch->finish(true);
  }
  routes_.clear();
  on_channel_ = nullptr;
  other_ = nullptr;
  error_code ec;
  socket_.close(ec);
}

Status QuicEndpoint::send_to(const udp::endpoint& to, ByteView data, std::optional<int> ttl) {
  if (closed_) return make_error(ErrorCode::kFailedPrecondition, "the QUIC endpoint is closed");
  int fd = socket_.native_handle();
  bool v6 = local_.protocol() == udp::v6();
  int level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
  int name = v6 ? IPV6_UNICAST_HOPS : IP_TTL;
  int old = 0;
  socklen_t oldlen = sizeof old;
  if (ttl) {
    if (getsockopt(fd, level, name, &old, &oldlen) != 0) {
      return make_error(ErrorCode::kInternal, std::string("cannot read the socket's TTL: ") + std::strerror(errno));
    }
    int v = *ttl;
    if (setsockopt(fd, level, name, &v, sizeof v) != 0) {
      return make_error(ErrorCode::kInvalidArgument, "cannot set TTL " + std::to_string(v) + ": " + std::strerror(errno));
    }
  }
  error_code ec;
  socket_.send_to(asio::buffer(data.data(), data.size()), to, 0, ec);
  if (ttl) setsockopt(fd, level, name, &old, sizeof old);
  if (ec) {
    return make_error(ErrorCode::kUnavailable, "cannot send to " + to.address().to_string() + ":" +
                                                   std::to_string(to.port()) + ": " + ec.message());
  }
  return ok_status();
}

QuicEndpoint::SendResult QuicEndpoint::send_batch(const udp::endpoint& to, const uint8_t* data, size_t len,
                                                  size_t segment) {
  if (closed_) return SendResult::kFailed;
  int fd = socket_.native_handle();
  if (gso_ && segment < len) {
    iovec iov{const_cast<uint8_t*>(data), len};
    msghdr msg{};
    msg.msg_name = const_cast<void*>(static_cast<const void*>(to.data()));
    msg.msg_namelen = static_cast<socklen_t>(to.size());
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = IPPROTO_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = static_cast<uint16_t>(segment);
    std::memcpy(CMSG_DATA(cm), &seg, sizeof seg);
    ssize_t n;
    do {
      n = ::sendmsg(fd, &msg, 0);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
      ++stats_.batches_out;
      stats_.datagrams_out += (len + segment - 1) / segment;
      return SendResult::kSent;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return SendResult::kWouldBlock;
    if (errno != EIO && errno != EINVAL && errno != EOPNOTSUPP) return SendResult::kFailed;
    gso_ = false;  // the device or kernel cannot segment: one datagram per call from now on
  }
  for (size_t off = 0; off < len; off += segment) {
    size_t n = std::min(segment, len - off);
    ssize_t r;
    do {
      r = ::sendto(fd, data + off, n, 0, static_cast<const sockaddr*>(static_cast<const void*>(to.data())),
                   static_cast<socklen_t>(to.size()));
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && off == 0) return SendResult::kWouldBlock;
      return off == 0 ? SendResult::kFailed : SendResult::kSent;  // the rest counts as lost
    }
    ++stats_.datagrams_out;
  }
  ++stats_.batches_out;
  return SendResult::kSent;
}

void QuicEndpoint::wait_writable(std::function<void()> then) {
  if (closed_) return;
  socket_.async_wait(udp::socket::wait_write, [then = std::move(then)](error_code ec) {
    if (!ec) then();
  });
}

}  // namespace yonder::quic
