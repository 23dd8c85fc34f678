// Fuzzes a listening QUIC endpoint (net/quic) with arbitrary datagrams from
// one address: the demultiplexer (non-QUIC bytes, connection ids, Initials),
// ngtcp2's packet decoding behind the adapter, and the handshake with our
// raw-key checks. The input is a sequence of datagrams, each a 2-byte
// big-endian length and its bytes (a short tail is one last datagram).
// Invariants: nothing crashes, no handshake is confirmed (no input can carry
// a key the endpoint accepts: accept_key refuses all), non-QUIC datagrams go
// to the other-datagram handler byte for byte.
#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdlib>

#include "crypto/identity.h"
#include "net/quic/quic_endpoint.h"

using namespace yonder;
namespace asio = boost::asio;

namespace {
const Identity& identity() {
  static Identity id = [] {
    Bytes seed(32, 0x42);
    auto r = Identity::from_seed(seed);
    if (!r) std::abort();
    return std::move(*r);
  }();
  return id;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static asio::io_context io;
  io.restart();
  auto loopback = asio::ip::make_address("127.0.0.1");
  auto ep = quic::QuicEndpoint::bind(io.get_executor(), identity(), asio::ip::udp::endpoint(loopback, 0));
  if (!ep) std::abort();
  bool confirmed = false;
  (*ep)->listen([](const PublicKeyBytes&) { return false; },
                [&](std::shared_ptr<quic::QuicChannel>, PublicKeyBytes) { confirmed = true; });
  Bytes other_expected, other_seen;
  (*ep)->on_other_datagram([&](const asio::ip::udp::endpoint&, ByteView d) {
    other_seen.insert(other_seen.end(), d.begin(), d.end());
  });
  // Replies go to a port nobody listens on (the discard port).
  asio::ip::udp::endpoint from(loopback, 9);
  size_t pos = 0;
  while (pos < size) {
    size_t len = size - pos;
    if (len >= 2) {
      len = std::min<size_t>((size_t{data[pos]} << 8) | data[pos + 1], size - pos - 2);
      pos += 2;
    }
    ByteView d(data + pos, len);
    if (!quic::looks_like_quic(d) && !d.empty()) other_expected.insert(other_expected.end(), d.begin(), d.end());
    (*ep)->inject_datagram(from, d);
    io.poll();
    pos += len;
  }
  if (other_seen != other_expected) __builtin_trap();
  if (confirmed) __builtin_trap();
  (*ep)->close();
  ep->reset();
  io.poll();
  return 0;
}
