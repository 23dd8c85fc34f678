// The one thing hole punching needs from a UDP socket: sending a datagram,
// optionally with its own IP TTL. Received datagrams go the other way: the
// socket's owner hands them to whoever they are for (StunCheck, Puncher) by
// calling their on_datagram. So the punch code runs over the QUIC carrier's
// socket in yonderd (the lead's adapter) and over UdpDatagramPort in tests,
// and never owns a socket itself.
//
// Demultiplexing on the shared socket, by first byte (RFC 7983 style):
//   0x00-0x03 and the STUN cookie    STUN (stun.h looks_like_stun)
//   kPunchFirstByte (0x0b) + magic   punch probes and acks (punch_packet.h)
//   0x40-0xff (bit 0x40 set)         QUIC
// punch::classify_datagram (punch_packet.h) does it.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <optional>

#include "base/bytes.h"

namespace yonder::punch {

using udp = boost::asio::ip::udp;
using MonoTime = std::chrono::steady_clock::time_point;

// A datagram a sans-I/O core wants sent (its driver passes it to a DatagramPort).
struct OutgoingDatagram {
  udp::endpoint to;
  Bytes bytes;
  std::optional<int> ttl;  // IP TTL for this datagram only; unset: the socket's default
  // Which socket sends it: 0 the shared one (a DatagramPort); k >= 1 the
  // k-th of the sockets a birthday punch opens (puncher.h; the driver,
  // punch_session.h, opens and owns them).
  int via = 0;
};

class DatagramPort {
 public:
  virtual ~DatagramPort() = default;
  // Sends one datagram to `to`, now, best effort (a full socket buffer or an
  // unreachable address drops it; UDP promises nothing more). With `ttl`,
  // this datagram alone leaves with that IP TTL (IPv6: hop limit). Called
  // on the owner's event-loop thread.
  virtual void send_to(const udp::endpoint& to, ByteView bytes, std::optional<int> ttl) = 0;
};

}  // namespace yonder::punch
