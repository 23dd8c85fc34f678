// The Asio driver of a Puncher (puncher.h, where the exchange and the wiring
// are described): reads the steady clock, sends the core's datagrams through
// a DatagramPort and its signals through the caller's signal sender, and
// keeps one timer at the core's next deadline.
//
// Lifetime: the caller holds the shared_ptr; `done` is called once, on the
// loop, with the outcome (the session then lingers, acking the peer's
// probes, until finished(); dropping it earlier is fine). The DatagramPort
// must outlive the session.
#pragma once

#include <functional>
#include <memory>

#include "net/punch/puncher.h"

namespace boost::asio {
class io_context;
}

namespace yonder::punch {

class PunchSession : public std::enable_shared_from_this<PunchSession> {
 public:
  using SignalSender = std::function<void(Bytes)>;  // to the peer, e.g. RelayPaths::send_signal
  using Done = std::function<void(const PunchOutcome&)>;

  static std::shared_ptr<PunchSession> create(boost::asio::io_context& io, DatagramPort& port, PuncherConfig config,
                                              SignalSender send_signal, Done done);
  ~PunchSession();

  void start();
  void on_signal(const PunchSignal& signal);
  // Punch packets (classify_datagram == kPunch); true when this session's.
  bool on_datagram(const udp::endpoint& from, ByteView bytes);
  void cancel();

  uint64_t session() const { return core_.session(); }
  bool finished() const { return core_.finished(); }

  struct Timer;

 private:
  PunchSession(boost::asio::io_context& io, DatagramPort& port, PuncherConfig config, SignalSender send_signal,
               Done done);
  void pump();

  DatagramPort& port_;
  Puncher core_;
  SignalSender send_signal_;
  Done done_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace yonder::punch
