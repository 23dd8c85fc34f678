// netcheck over UDP: which public address does this socket have, and does
// its NAT allow hole punching? Sans-I/O core (NatCheck) plus a thin Asio
// driver (NatCheckSession).
//
// The node sends a STUN Binding request (stun.h) from its one UDP socket to
// each relay's UDP port; each relay answers with the address it saw. With
// two relays at different IP addresses:
//   same mapped address   -> endpoint-independent mapping: the NAT gives
//                            this socket one public port towards everyone,
//                            so a peer can punch to it (NatKind::kPunchable);
//   different addresses   -> endpoint-dependent mapping ("symmetric"): a new
//                            port per destination, which the peer cannot
//                            predict: do not punch, stay on the relay;
//   one answer            -> the public address, but no verdict (kUnknown);
//   no answer             -> UDP to the relays is blocked (kUnknown).
// (RFC 4787 section 4.1 defines the mapping behaviours; RFC 5780 section 4.3
// tests them this way, with two server addresses.)
//
// Requests are retransmitted after 200, 400, 800, 1600 ms (doubling, at most
// max_sends per server), the whole check ends after `timeout` at the latest.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/punch/datagram_port.h"
#include "net/punch/signal.h"
#include "net/punch/stun.h"

namespace boost::asio {
class io_context;
}

namespace yonder::punch {

struct NatCheckConfig {
  std::vector<udp::endpoint> servers;  // 1-4 relays' STUN addresses; two at different IPs give a verdict
  std::chrono::milliseconds first_retransmit{200};
  int max_sends = 5;  // per server
  std::chrono::milliseconds timeout{3000};
};

struct ServerMapping {
  udp::endpoint server;
  std::optional<udp::endpoint> mapped;  // unset: no answer
};

struct NatCheckResult {
  NatKind nat = NatKind::kUnknown;
  std::string why;                              // one sentence for `yonder netcheck`
  std::optional<udp::endpoint> public_address;  // the first server's answer (else any answer)
  std::vector<ServerMapping> servers;
};

class NatCheck {
 public:
  explicit NatCheck(NatCheckConfig config, std::function<StunTransactionId()> random = random_transaction_id);

  void start(MonoTime now);
  // A datagram from the socket; true when it was the answer to one of our
  // requests (from the server we asked, with our transaction id).
  bool on_datagram(MonoTime now, const udp::endpoint& from, ByteView bytes);
  void on_timer(MonoTime now);
  std::optional<MonoTime> next_deadline() const;
  std::vector<OutgoingDatagram> take_datagrams();
  bool done() const { return done_; }
  const NatCheckResult& result() const { return result_; }

 private:
  struct Server {
    udp::endpoint address;
    StunTransactionId transaction{};
    int sends = 0;
    MonoTime next_send{};
    std::optional<udp::endpoint> mapped;
  };
  void send(Server& s, MonoTime now);
  void finish();

  NatCheckConfig config_;
  std::function<StunTransactionId()> random_;
  std::vector<Server> servers_;
  std::vector<OutgoingDatagram> out_;
  MonoTime deadline_{};
  bool started_ = false;
  bool done_ = false;
  NatCheckResult result_;
};

// The driver: runs a NatCheck over `port` on the io_context's thread. The
// port's owner passes every STUN datagram (classify_datagram) to
// on_datagram while the check runs. `done` is called once, on the loop.
class NatCheckSession : public std::enable_shared_from_this<NatCheckSession> {
 public:
  static std::shared_ptr<NatCheckSession> start(boost::asio::io_context& io, DatagramPort& port, NatCheckConfig config,
                                                std::function<void(const NatCheckResult&)> done);
  ~NatCheckSession();
  bool on_datagram(const udp::endpoint& from, ByteView bytes);
  void cancel();

  struct Timer;

 private:
  NatCheckSession(boost::asio::io_context& io, DatagramPort& port, NatCheckConfig config,
                  std::function<void(const NatCheckResult&)> done);
  void pump();

  DatagramPort& port_;
  NatCheck core_;
  std::function<void(const NatCheckResult&)> done_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace yonder::punch
