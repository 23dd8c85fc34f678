// Relays from among our peers, without I/O (libp2p's circuit relay with
// AutoRelay, over our own pinned links): a node that its peers confirmed
// reachable (dial_back_core.h) offers a relay to them, and a node that is
// not reachable picks a few of the relays its peers offer, registers with
// them and names them in its share links, so two peers behind NATs meet at
// a friend's box with no server rented for it.
//
//   - Whether to check reachability now (reachability_check_due): with
//     relay.offer "auto", a node whose link listens beyond loopback asks
//     its peers to dial it back when a session with one comes up and the
//     last verdict is old (or was "unknown" a while ago), never two rounds
//     at once.
//   - Whether to offer (decide_offer): "auto" offers once the last round
//     found this node reachable; "off" never. peer_link.cpp starts the
//     relay only then, so a node nobody can reach opens no relay port. At
//     a public address (or one the router forwards by hand) the relay is
//     offered at the reached host with its own port; when peers reached
//     the router's mapping of the link port (UPnP-IGD, NAT-PMP), the relay's
//     port is mapped too and offered at that mapping, once it holds.
//   - When to close it again (decide_offer's stop_relay): a relay that an
//     offer opened (relay.listen unset) is closed, with the router's
//     forward of its port, once peers answered that they cannot reach this
//     node (or relay.offer is off): nobody could reach it, and an open port
//     nobody can use is only exposure. "Unknown" (nobody answered) closes
//     nothing; the next round decides. A relay the operator configured
//     stays.
//   - Where the relay listens (default_relay_listen): relay.listen, or the
//     link's host with the link's port + 1 (port 0 stays 0: a free one).
//   - Reading an offer (read_relay_offer): untrusted JSON from a pinned
//     peer; the address must be a public IPv4 endpoint, not this host
//     (relay::check_dial_back_target), or a hostile peer could point our
//     relay client at our own LAN.
//   - Choosing (choose_offered_relays): a node that offers its own relay
//     uses none of its peers'; otherwise one offer per peer, lowest RTT
//     first (unknown last), then by key, at most kMaxOfferedRelays.
//
// A relay a peer offers is pinned by that peer's key: the relay's TLS
// handshake proves the key of the node that runs it, so an offer of someone
// else's relay fails the pin.
//
// Never touches a socket, a clock or a thread; event loop only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "crypto/node_id.h"
#include "net/reach/dial_back_core.h"

namespace yonder::reach {

inline constexpr size_t kMaxOfferedRelays = 3;
// After a verdict of reachable or unreachable, the next round is due this
// long after; after "unknown" (no helper answered), sooner.
inline constexpr std::chrono::minutes kRecheckAfterVerdict{10};
inline constexpr std::chrono::seconds kRecheckAfterUnknown{30};

enum class RelayOfferMode { kAuto, kOff };

// relay.offer: "auto" or "off".
Result<RelayOfferMode> parse_relay_offer_mode(const std::string& text);

// `listening_beyond_loopback`: link.listen names an address peers can dial.
// `last_round`: when the last round started (none: never).
bool reachability_check_due(RelayOfferMode mode, bool listening_beyond_loopback, bool round_in_progress,
                            const std::optional<MonoTime>& last_round, const std::optional<Reachability>& verdict,
                            MonoTime now);

// What decide_offer looks at.
struct OfferFacts {
  RelayOfferMode mode = RelayOfferMode::kAuto;
  std::optional<Reachability> verdict;  // the last dial-back round's (none: none yet)
  std::string link_mapped;              // "IP:PORT" the router forwards to the link ("" none)
  uint16_t relay_port = 0;              // the relay's listening port (0: not running)
  std::string relay_mapped;             // "IP:PORT" the router forwards to the relay ("" none)
  bool relay_configured = false;        // relay.listen is set: the operator runs the relay, not the offer
};

struct OfferDecision {
  bool run_relay = false;  // start the relay (if it is not running)
  bool map_relay = false;  // ask the router to forward the relay's port
  std::string address;     // offer this "IP:PORT" ("" none)
  std::string why;         // no address: why, for netcheck
  bool stop_relay = false;  // close the relay the offer opened, and the router's forward of its port
};
OfferDecision decide_offer(const OfferFacts& facts);

// Where this node's relay listens: `relay_listen` when set, else the host
// of `link_listen` with its port + 1 (0: 0). Empty when neither names one.
std::string default_relay_listen(const std::string& relay_listen, const std::string& link_listen);

// The body of `reach.relay_offer` as the offering node sends it:
// {"address": "IP:PORT"} offers, {"address": ""} withdraws.
nlohmann::json relay_offer_body(const std::string& address);
// A peer's offer: the address ("" when it withdrew its offer), or why it
// is refused. `own_hosts`: this host's addresses.
Result<std::string> read_relay_offer(const nlohmann::json& body, const std::vector<std::string>& own_hosts);

struct PeerOffer {
  PublicKeyBytes peer{};
  std::string name;
  std::string address;  // "IP:PORT" of the relay the peer runs
  std::optional<double> rtt_ms;
  bool operator==(const PeerOffer&) const = default;
};

// The offers this node registers with (see the rules above).
std::vector<PeerOffer> choose_offered_relays(std::vector<PeerOffer> offers, bool offering_ourselves,
                                             size_t max = kMaxOfferedRelays);

}  // namespace yonder::reach
