#include "relay/stun_responder.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>
#include <cstring>

#include "net/punch/stun.h"

namespace yonder::relay {

namespace asio = boost::asio;
using udp = asio::ip::udp;

namespace {

// Datagrams handled per wake-up before yielding to the loop's other work.
constexpr int kBatch = 64;

// Control buffer large enough for either packet-info message.
union ControlBuffer {
  cmsghdr align;
  char bytes[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(in_pktinfo))];
};

std::optional<asio::ip::address> destination_of(msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof(info));
      asio::ip::address_v4::bytes_type b{};
      std::memcpy(b.data(), &info.ipi_addr, 4);
      return asio::ip::address_v4(b);
    }
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof(info));
      asio::ip::address_v6::bytes_type b{};
      std::memcpy(b.data(), &info.ipi6_addr, 16);
      return asio::ip::address_v6(b);
    }
  }
  return std::nullopt;
}

}  // namespace

StunResponder::StunResponder(asio::io_context& io, Metrics& metrics, double rate, double burst)
    : socket_(io), metrics_(metrics), budget_(rate, burst, std::chrono::steady_clock::now()) {}

Status StunResponder::open(const udp::endpoint& local) {
  boost::system::error_code ec;
  socket_.open(local.protocol(), ec);
  if (!ec) socket_.bind(local, ec);
  if (!ec) socket_.non_blocking(true, ec);
  if (ec) {
    boost::system::error_code ignored;
    socket_.close(ignored);
    return make_error(ErrorCode::kUnavailable, "cannot listen for STUN on UDP " + local.address().to_string() + ":" +
                                                   std::to_string(local.port()) + ": " + ec.message());
  }
  int on = 1;
  if (local.protocol() == udp::v4()) {
    ::setsockopt(socket_.native_handle(), IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
  } else {
    ::setsockopt(socket_.native_handle(), IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
  }
  receive_next();
  return ok_status();
}

udp::endpoint StunResponder::local_endpoint() const {
  boost::system::error_code ec;
  return socket_.local_endpoint(ec);
}

void StunResponder::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void StunResponder::receive_next() {
  auto self = shared_from_this();
  socket_.async_wait(udp::socket::wait_read, [this, self](boost::system::error_code ec) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (!ec) drain();
    receive_next();
  });
}

void StunResponder::drain() {
  for (int i = 0; i < kBatch && !stopped_; ++i) {
    udp::endpoint from;
    iovec iov{buf_.data(), buf_.size()};
    ControlBuffer control{};
    msghdr msg{};
    msg.msg_name = from.data();
    msg.msg_namelen = static_cast<socklen_t>(from.capacity());
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT);
    if (n < 0) return;  // EAGAIN: drained; anything else: nothing to answer
    from.resize(msg.msg_namelen);
    // A datagram longer than the buffer is cut (MSG_TRUNC): no STUN request we answer is that long.
    if (msg.msg_flags & MSG_TRUNC) {
      ++metrics_.stun_ignored_total;
      continue;
    }
    on_datagram(static_cast<size_t>(n), from, destination_of(msg));
  }
}

void StunResponder::on_datagram(size_t n, const udp::endpoint& from, const std::optional<asio::ip::address>& to) {
  auto answer = punch::answer_binding_request(ByteView(buf_.data(), n), from);
  if (!answer) {
    ++metrics_.stun_ignored_total;
    return;
  }
  if (budget_.available(std::chrono::steady_clock::now()) < 1) {
    ++metrics_.stun_rate_limited_total;
    return;
  }
  budget_.consume(1);
  iovec iov{answer->data(), answer->size()};
  ControlBuffer control{};
  msghdr msg{};
  msg.msg_name = const_cast<sockaddr*>(from.data());
  msg.msg_namelen = static_cast<socklen_t>(from.size());
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Leave from the address that was asked (matters with a wildcard bind).
  // One control message naming `info` (an in_pktinfo or in6_pktinfo).
  // (The buffer goes in by pointer: clang cannot capture a union holding a
  // cmsghdr, whose last member is a flexible array.)
  auto set_source = [&msg, bytes = static_cast<char*>(control.bytes)](int level, int type, const auto& info) {
    msg.msg_control = bytes;
    msg.msg_controllen = CMSG_SPACE(sizeof(info));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(sizeof(info));
    std::memcpy(CMSG_DATA(c), &info, sizeof(info));
  };
  if (to && to->is_v4() && from.address().is_v4()) {
    in_pktinfo info{};
    auto b = to->to_v4().to_bytes();
    std::memcpy(&info.ipi_spec_dst, b.data(), 4);
    set_source(IPPROTO_IP, IP_PKTINFO, info);
  } else if (to && to->is_v6()) {
    in6_pktinfo info{};
    auto b = to->to_v6().to_bytes();
    std::memcpy(&info.ipi6_addr, b.data(), 16);
    set_source(IPPROTO_IPV6, IPV6_PKTINFO, info);
  }
  if (::sendmsg(socket_.native_handle(), &msg, MSG_DONTWAIT) >= 0) ++metrics_.stun_answered_total;  // best effort
}

}  // namespace yonder::relay
