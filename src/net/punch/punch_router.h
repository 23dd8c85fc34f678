// Every punch session on one UDP socket, by peer, between a node's relay
// signals, its UDP socket and its links (tests and labs use it; yonderd's
// net/reach/punch_paths.cpp drives the sessions itself). It starts an initiator
// when asked (punch), makes a responder when a peer's offer arrives, sorts
// the two out when both sides started at once (glare: the side with the
// smaller key stays initiator, initiator_is_self), and routes punch packets
// to their session by session id.
//
//   PunchRouter router(io, port, identity.public_key(), {
//       .config_for = [&](const PublicKeyBytes& peer) -> std::optional<PuncherConfig> {
//         if (!paired(peer)) return std::nullopt;          // offers from strangers are ignored
//         PuncherConfig c; c.candidates = {host, srflx}; c.nat = netcheck.nat; return c;
//       },
//       .send_signal = [&](const PublicKeyBytes& peer, Bytes b) { relay_paths.send_signal(peer, std::move(b)); },
//       .done = [&](const PublicKeyBytes& peer, const PunchOutcome& o) { ... dial QUIC at o.remote, or note o.reason
//       ... },
//   });
//   router.punch(peer);                                  // a link to `peer` is on the relay
//   relay signal hook:  if (!router.on_signal(from, data)) { ... a path hint ... }
//   QUIC's other datagrams: if (classify_datagram(b) == DatagramKind::kPunch) router.on_datagram(from, b);
//
// A birthday punch's outcome (via >= 1) runs from a socket of the session's
// own: take it with take_port to carry the path.
//
// config_for fills candidates, nat and timings; the router sets role and
// keys. `done` is called once per session, on the loop. Threading: the
// io_context's thread only. The port must outlive the router.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "net/punch/punch_session.h"

namespace yonder::punch {

class PunchRouter {
 public:
  struct Hooks {
    std::function<std::optional<PuncherConfig>(const PublicKeyBytes& peer)> config_for;
    std::function<void(const PublicKeyBytes& peer, Bytes signal)> send_signal;
    std::function<void(const PublicKeyBytes& peer, const PunchOutcome& outcome)> done;
    // The sessions' randomness (session ids, birthday ports); unset: the
    // system's (tests seed it).
    std::function<uint64_t()> random;
  };

  PunchRouter(boost::asio::io_context& io, DatagramPort& port, const PublicKeyBytes& self, Hooks hooks);
  ~PunchRouter();
  PunchRouter(const PunchRouter&) = delete;
  PunchRouter& operator=(const PunchRouter&) = delete;

  // Starts punching to `peer`, unless a session with it is running (or
  // config_for refuses). A finished or lingering session is replaced.
  void punch(const PublicKeyBytes& peer);
  // A relay signal from `peer`: true when it was a punch signal (handled or
  // ignored), false for anything else (a path hint: the caller's).
  bool on_signal(const PublicKeyBytes& peer, ByteView bytes);
  // A punch packet (classify_datagram == kPunch): true when a session took it.
  bool on_datagram(const udp::endpoint& from, ByteView bytes);
  // Ends the session with `peer` without an outcome.
  void cancel(const PublicKeyBytes& peer);
  // The socket a birthday punch to `peer` runs from (its outcome's via),
  // taken over by the caller (PunchSession::take_port).
  Result<udp::socket> take_port(const PublicKeyBytes& peer, int via);
  // A session with `peer` is still punching (no outcome yet).
  bool punching(const PublicKeyBytes& peer) const;
  void stop();

 private:
  struct Entry {
    std::shared_ptr<PunchSession> session;
    Role role = Role::kInitiator;
    bool has_outcome = false;
  };
  std::shared_ptr<PunchSession> make(const PublicKeyBytes& peer, Role role);
  void sweep();

  boost::asio::io_context& io_;
  DatagramPort& port_;
  PublicKeyBytes self_;
  Hooks hooks_;
  std::map<PublicKeyBytes, Entry> sessions_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::punch
