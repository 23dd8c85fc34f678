// Hole-punched direct paths: when the link to a paired peer runs
// through a relay, the two nodes punch a UDP path through their NATs and
// move the link onto a QUIC connection over it.
//
// One UDP socket (a quic::QuicEndpoint, link.udp_listen) carries everything:
//   - STUN to the relays' UDP ports (same number as their TCP port): this
//     node's public UDP mapping and whether its NAT keeps one mapping for
//     every destination (punchable) or makes one per destination
//     (symmetric: stay on the relay);
//   - the punch probes (punch::PunchSession, coordinated through relay
//     signals: offer, answer, go);
//   - the QUIC connection, client on the side that initiated the punch
//     (the smaller key), whose TLS pins the peer's raw key exactly as the
//     TCP carrier pins its certificate key.
// Except after birthday probing (one NAT symmetric): the symmetric side's
// path runs from one of the punch's own ports, so that side takes the port
// over as a QUIC endpoint of its own and dials from it, whichever side
// initiated; the other side's listener adopts the connection. At most one
// birthday punch holds its 256 ports at a time; another peer's meanwhile
// goes without (and is tried again after the usual backoff).
// The QUIC channel becomes a link session (LinkService::adopt_channel) with
// path "punched quic IP:PORT"; the relayed session drains (its running
// streams finish on it), so nothing running breaks. If the direct path dies
// (the QUIC idle timeout, or the mux's keepalive), the link redials through
// the relay as always, and a later relayed session tries punching again
// (with backoff after failures).
//
// Event loop only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "net/link/link_service.h"

namespace boost::asio {
class io_context;
}

namespace yonder::reach {

class PunchPaths {
 public:
  struct Hooks {
    std::function<std::vector<std::string>()> relays;                  // HOST:PORT of every relay
    // Through one relay; `rounds` 1: no retry (RelayPaths::send_signal);
    // `done` hears whether a relay took it.
    std::function<void(const PublicKeyBytes&, Bytes, std::function<void(Status)> done, int rounds)> send_signal;
    std::function<bool(const PublicKeyBytes&)> pinned;                  // paired and not denied
    // Whether a relay's registrations saw this node's NAT pick a new public
    // port for each TCP connection (symmetric over TCP). When one relay
    // cannot tell the UDP NAT's kind, that is taken for UDP too: no punch,
    // and netcheck and the peer say why. Unset: never.
    std::function<bool()> tcp_symmetric;
    // Birthday probing when one NAT is symmetric and the other keeps one
    // port (link.punch_birthday; punch/puncher.h).
    bool birthday = true;
  };

  // `listen`: "IP:PORT" for the UDP socket; empty: `preferred_host` (the
  // link's listening address; "" for all) on `preferred_port` when it is
  // free, else any port. `keepalive`: a punched path sends a QUIC PING after
  // this long without sending (link.punch_keepalive_s), so that both NATs
  // keep its mapping: RFC 4787 asks routers to keep an idle UDP mapping
  // 2 minutes, but some drop it within 10 s, and a Linux router gives a
  // flow its two-way timeout only for a packet more than 2 s after the
  // flow began (after the punch, the first keepalive). A punched path that
  // hears nothing for four keepalives ends (QUIC's idle timeout), and the
  // link goes back to the relay.
  PunchPaths(boost::asio::io_context& io, const Identity& identity, link::LinkService& link, Hooks hooks,
             std::string listen, std::string preferred_host, uint16_t preferred_port,
             std::chrono::milliseconds keepalive);
  ~PunchPaths();
  PunchPaths(const PunchPaths&) = delete;
  PunchPaths& operator=(const PunchPaths&) = delete;

  Status start();
  void stop();

  // A session to `peer` is up on `path` (LinkService::on_established).
  void on_established(const PublicKeyBytes& peer, const std::string& path);
  // A relay signal that is_punch_signal.
  void on_signal(const PublicKeyBytes& from, ByteView data);
  // netcheck asks again: a fresh NAT check; `done` once it has an answer
  // (at once when hole punching is off).
  void recheck(std::function<void()> done);

  // For GET /v1/netcheck: the UDP socket, public mapping, NAT kind, why.
  nlohmann::json status() const;
  // The UDP socket's port (0: none), and where a relay's STUN saw it
  // ("IP:PORT"; "" before a NAT check found it): what a dial-back over UDP
  // tests (dial_back_core.h).
  uint16_t udp_port() const;
  std::string public_udp() const;
  // A dial-back over UDP (dial_back.h): whether `peer` completes a QUIC
  // handshake that proves its key at `address` ("IP:PORT") within `within`,
  // from a fresh socket on a port of its own, so that no packet this node
  // sent before opens the peer's NAT to it; the connection is closed at
  // once, never a session.
  void probe_udp(const PublicKeyBytes& peer, const std::string& address, std::chrono::milliseconds within,
                 std::function<void(Status)> done);
  // For GET /v1/peers: the last punch to `peer` (state, reason, times); null if none.
  nlohmann::json peer_state(const PublicKeyBytes& peer) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::reach
