// The Asio driver of a Puncher (puncher.h, where the exchange and the wiring
// are described): reads the steady clock, sends the core's datagrams through
// a DatagramPort and its signals through the caller's signal sender, and
// keeps one timer at the core's next deadline.
//
// Birthday probing (puncher.h): on the symmetric side the session opens the
// core's birthday ports itself (UdpDatagramPort, bound to the birthday
// address, any port), hands what they receive to the core, and closes them
// when the punch ends; the one a punched path runs from (PunchOutcome::via)
// stays open until the owner takes it (take_port) or drops the session.
//
// Lifetime: the caller holds the shared_ptr; `done` is called once, on the
// loop, with the outcome (the session then lingers, acking the peer's
// probes, until finished(); dropping it earlier is fine). The DatagramPort
// must outlive the session.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "net/punch/puncher.h"
#include "net/punch/udp_datagram_port.h"

namespace boost::asio {
class io_context;
}

namespace yonder::punch {

class PunchSession : public std::enable_shared_from_this<PunchSession> {
 public:
  using SignalSender = std::function<void(Bytes)>;  // to the peer, e.g. RelayPaths::send_signal
  using Done = std::function<void(const PunchOutcome&)>;

  // `random`: the core's randomness (session ids, birthday ports); unset:
  // the system's (RAND_bytes). Tests pass a seeded one.
  static std::shared_ptr<PunchSession> create(boost::asio::io_context& io, DatagramPort& port, PuncherConfig config,
                                              SignalSender send_signal, Done done,
                                              std::function<uint64_t()> random = nullptr);
  ~PunchSession();

  void start();
  void on_signal(const PunchSignal& signal);
  // Punch packets (classify_datagram == kPunch); true when this session's.
  bool on_datagram(const udp::endpoint& from, ByteView bytes);
  void cancel();

  // Where birthday ports are bound (the shared socket's address; default
  // 0.0.0.0). Set before start().
  void set_birthday_address(const boost::asio::ip::address& address) { birthday_address_ = address; }
  // The socket of birthday port `via` (a punched outcome's via), taken over
  // by the caller (e.g. quic::QuicEndpoint::adopt); an error when it is not
  // open. The session no longer reads from it.
  Result<udp::socket> take_port(int via);
  // Birthday ports open now, and probes not sent because the system refused
  // a port (too many open files).
  size_t open_ports() const { return ports_.size(); }
  size_t ports_refused() const { return ports_refused_; }

  uint64_t session() const { return core_.session(); }
  bool finished() const { return core_.finished(); }

  struct Timer;

 private:
  PunchSession(boost::asio::io_context& io, DatagramPort& port, PuncherConfig config, SignalSender send_signal,
               Done done, std::function<uint64_t()> random);
  void pump();
  DatagramPort* birthday_port(int via);
  void close_ports(int keep);

  boost::asio::io_context& io_;
  DatagramPort& port_;
  boost::asio::ip::address birthday_address_ = boost::asio::ip::address_v4::any();
  std::map<int, std::unique_ptr<UdpDatagramPort>> ports_;
  size_t ports_refused_ = 0;
  Puncher core_;
  SignalSender send_signal_;
  Done done_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace yonder::punch
