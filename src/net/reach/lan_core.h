// Whether to dial a paired peer seen on the LAN, without I/O: the facts of
// one announcement (discovery::LanCandidate) and of the peer in, one action
// out. lan_paths.h gathers the facts (the trust store, the link's sessions)
// and does what the action says (LinkService::try_path with path "lan").
//
// The rules, in order:
//  1. The peer must be paired (pinned and not denied) and have announced a
//     link port.
//  2. Only one side dials, or both would, and each would keep its own new
//     session and drain the other's: the consumer (the side the peer grants
//     something, which keeps the link up); between two nodes that grant
//     each other, the one with the lower key.
//  3. A peer already reached on a LAN or direct path is not dialled again:
//     the LAN path would be no better.
//
// No timer and no `now`: the decision is the same whenever it is asked.
// When announcements are sent and how often they are examined is
// discovery::LanDiscoveryCore's, which takes `now` itself.
//
// Never touches a socket, a clock or a thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "crypto/node_id.h"
#include "net/reach/path_kind.h"

namespace yonder::reach {

// What this node knows of the peer an announcement names.
struct LanPeer {
  bool paired = false;           // pinned in the trust store and not denied
  bool grants_us = false;        // it granted this node a scope (this node consumes)
  bool we_grant = false;         // this node grants it at least one capability
  PublicKeyBytes key{};          // the peer's key
  std::optional<PathKind> best;  // its best established, non-draining session; none: no link
};

// The announcement: where the peer says its link listens.
struct LanSighting {
  std::string host;   // the datagram's source address, e.g. "192.168.1.10"
  uint16_t port = 0;  // the peer's link port (0: none announced)
};

struct LanAction {
  enum class Kind { kDial, kIgnore };
  Kind kind = Kind::kIgnore;
  std::string address;  // kDial: "host:port" to try with path "lan"
  std::string reason;   // kIgnore: why not, for the debug log and tests
};

// Rule 2 alone: whether this node is the side that dials `peer`.
bool lan_we_dial(const PublicKeyBytes& self, const LanPeer& peer);

LanAction decide_lan_dial(const PublicKeyBytes& self, const LanSighting& seen, const LanPeer& peer);

}  // namespace yonder::reach
