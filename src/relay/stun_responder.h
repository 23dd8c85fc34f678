// The relay's UDP side: a STUN Binding responder (net/punch/stun.h) on the
// same port number as the relay's TCP port, so a node learns its public UDP
// address (server-reflexive candidate) and, with two relays, whether its NAT
// maps per destination (net/punch/nat_check.h).
//
// Never an amplifier: only well-formed Binding requests are answered (at
// most 24 bytes more than they were), and all answers together are held to
// a token bucket (`rate` a second, `burst`); the rest is dropped and
// counted. Answers leave from the address the request was sent to
// (IP_PKTINFO / IPV6_PKTINFO), so a relay bound to a wildcard address on a
// host with several addresses is answered from the one the node asked (a
// NAT drops answers from any other). Event-loop thread only.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <memory>
#include <optional>

#include "base/error.h"
#include "relay/metrics.h"
#include "relay/token_bucket.h"

namespace yonder::relay {

class StunResponder : public std::enable_shared_from_this<StunResponder> {
 public:
  // `metrics` must outlive the responder (the server's).
  StunResponder(boost::asio::io_context& io, Metrics& metrics, double rate, double burst);
  // Binds `local` (port 0 picks one) and starts answering.
  Status open(const boost::asio::ip::udp::endpoint& local);
  boost::asio::ip::udp::endpoint local_endpoint() const;
  void stop();

 private:
  void receive_next();
  // Reads what is queued (a bounded batch) and answers it.
  void drain();
  void on_datagram(size_t n, const boost::asio::ip::udp::endpoint& from,
                   const std::optional<boost::asio::ip::address>& to);

  boost::asio::ip::udp::socket socket_;
  Metrics& metrics_;
  TokenBucket budget_;
  std::array<uint8_t, 2048> buf_{};
  bool stopped_ = false;
};

}  // namespace yonder::relay
