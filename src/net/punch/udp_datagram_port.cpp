#include "net/punch/udp_datagram_port.h"

#include <boost/asio/ip/unicast.hpp>

#include <array>

namespace yonder::punch {

namespace asio = boost::asio;

// Shared with the pending receive, which may complete after the port is gone.
struct UdpDatagramPort::State {
  explicit State(asio::io_context& io) : socket(io) {}
  udp::socket socket;
  std::array<uint8_t, 65536> buf{};
  udp::endpoint from;
  Receiver receiver;
  int default_ttl = 64;
  bool closed = false;
};

namespace {

void receive_next(const std::shared_ptr<UdpDatagramPort::State>& s) {
  s->socket.async_receive_from(asio::buffer(s->buf), s->from, [s](boost::system::error_code ec, size_t n) {
    if (s->closed) return;
    if (ec == asio::error::operation_aborted) return;
    // ICMP errors reported on the socket (e.g. port unreachable) are not fatal for an unconnected socket.
    if (!ec && s->receiver) {
      auto receiver = s->receiver;  // the receiver may close the port, which drops s->receiver
      receiver(s->from, ByteView(s->buf.data(), n));
    }
    if (!s->closed) receive_next(s);
  });
}

}  // namespace

Result<std::unique_ptr<UdpDatagramPort>> UdpDatagramPort::open(asio::io_context& io, const udp::endpoint& local) {
  auto s = std::make_shared<State>(io);
  boost::system::error_code ec;
  s->socket.open(local.protocol(), ec);
  if (!ec) s->socket.bind(local, ec);
  if (!ec) s->socket.non_blocking(true, ec);
  if (ec) {
    return make_error(ErrorCode::kUnavailable, "cannot open a UDP socket on " + local.address().to_string() + ":" +
                                                   std::to_string(local.port()) + ": " + ec.message() +
                                                   "; choose a free port (0 picks one)");
  }
  asio::ip::unicast::hops hops;
  s->socket.get_option(hops, ec);
  if (!ec && hops.value() > 0) s->default_ttl = hops.value();
  return std::unique_ptr<UdpDatagramPort>(new UdpDatagramPort(std::move(s)));
}

UdpDatagramPort::UdpDatagramPort(std::shared_ptr<State> state) : state_(std::move(state)) {}

UdpDatagramPort::~UdpDatagramPort() {
  close();
}

void UdpDatagramPort::start(Receiver receiver) {
  state_->receiver = std::move(receiver);
  receive_next(state_);
}

void UdpDatagramPort::send_to(const udp::endpoint& to, ByteView bytes, std::optional<int> ttl) {
  if (state_->closed) return;
  boost::system::error_code ec;
  if (ttl) state_->socket.set_option(asio::ip::unicast::hops(*ttl), ec);
  state_->socket.send_to(asio::buffer(bytes.data(), bytes.size()), to, 0, ec);  // best effort
  if (ttl) state_->socket.set_option(asio::ip::unicast::hops(state_->default_ttl), ec);
}

udp::endpoint UdpDatagramPort::local_endpoint() const {
  boost::system::error_code ec;
  return state_->socket.local_endpoint(ec);
}

Result<udp::socket> UdpDatagramPort::release() {
  if (state_->closed) return make_error(ErrorCode::kFailedPrecondition, "the UDP socket is closed already");
  boost::system::error_code ec;
  udp::endpoint local = state_->socket.local_endpoint(ec);
  if (ec) return make_error(ErrorCode::kUnavailable, "the UDP socket has no address: " + ec.message());
  state_->closed = true;  // the cancelled receive sees this and stops
  state_->receiver = nullptr;
  auto handle = state_->socket.release(ec);  // cancels the pending receive
  if (ec) return make_error(ErrorCode::kUnavailable, "cannot take over the UDP socket: " + ec.message());
  udp::socket out(state_->socket.get_executor());
  out.assign(local.protocol(), handle, ec);
  if (ec) return make_error(ErrorCode::kUnavailable, "cannot take over the UDP socket: " + ec.message());
  out.set_option(asio::ip::unicast::hops(state_->default_ttl), ec);
  return out;
}

void UdpDatagramPort::close() {
  if (state_->closed) return;
  state_->closed = true;
  state_->receiver = nullptr;
  boost::system::error_code ec;
  state_->socket.close(ec);
}

}  // namespace yonder::punch
