#include "net/reach/lan_core.h"

#include <utility>

namespace yonder::reach {

bool lan_we_dial(const PublicKeyBytes& self, const LanPeer& peer) {
  if (!peer.grants_us) return false;  // the peer consumes from us and keeps the link up
  return !peer.we_grant || !(self > peer.key);
}

LanAction decide_lan_dial(const PublicKeyBytes& self, const LanSighting& seen, const LanPeer& peer) {
  auto ignore = [](std::string why) { return LanAction{LanAction::Kind::kIgnore, {}, std::move(why)}; };
  if (!peer.paired) return ignore("not a paired peer");
  if (seen.port == 0) return ignore("no link port announced");
  if (!lan_we_dial(self, peer)) {
    return ignore(peer.grants_us ? "both sides grant each other and the peer's key is lower: it dials"
                                 : "the peer keeps the link up: it dials");
  }
  if (peer.best && static_cast<int>(*peer.best) <= static_cast<int>(PathKind::kDirect)) {
    return ignore("already on a LAN or direct path");
  }
  return LanAction{LanAction::Kind::kDial, seen.host + ":" + std::to_string(seen.port), {}};
}

}  // namespace yonder::reach
