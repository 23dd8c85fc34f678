// The LAN path: paired peers find each other on the local network
// (discovery::LanDiscovery, multicast announcements only paired peers can
// read), and a peer whose link runs through a relay, or that has no link
// yet, is dialled on the LAN address it announced; the link moves there
// (LinkService::try_path, path "lan") and the worse session drains.
// Whether to dial is lan_core.h's decision; this unit gathers its facts
// from the trust store and the link's sessions and owns the socket.
//
// Event loop only.
#pragma once

#include <memory>
#include <string>

#include "crypto/identity.h"
#include "net/link/link_service.h"
#include "net/reach/local_host.h"
#include "peers/trust_store.h"

namespace boost::asio {
class io_context;
}

namespace yonder::discovery {
class LanDiscovery;
struct LanCandidate;
}

namespace yonder::reach {

class LanPaths {
 public:
  // `wanted`: link.lan_discovery. `store` and `link` outlive this.
  LanPaths(boost::asio::io_context& io, const Identity& identity, link::LinkService& link,
           const peers::TrustStore& store, bool wanted);
  ~LanPaths();
  LanPaths(const LanPaths&) = delete;
  LanPaths& operator=(const LanPaths&) = delete;

  // After the link listens (its port is what we announce); a no-op unless
  // wanted, and only a state to show unless the link listens beyond loopback.
  void start(Listening listening);
  // Paired peers changed (pairing, deny, allow): announce to the new set.
  void peers_changed();
  // netcheck asks the LAN again now.
  void query_now();
  void stop();
  // For netcheck: "on (eth0, ...)", or off/unavailable and why.
  const std::string& state() const { return state_; }

 private:
  void on_candidate(const discovery::LanCandidate& c);

  boost::asio::io_context& io_;
  const Identity& identity_;
  link::LinkService& link_;
  const peers::TrustStore& store_;
  bool wanted_;
  std::unique_ptr<discovery::LanDiscovery> lan_;
  std::string state_ = "off (link.lan_discovery = false)";
};

}  // namespace yonder::reach
