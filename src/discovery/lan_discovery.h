// LAN discovery on a real network: LanDiscoveryCore (the protocol) on one
// UDP socket joined to the multicast group on each chosen interface, driven
// by a Boost.Asio io_context. This is the whole I/O half; README.md has the
// picture and the privacy choice.
//
// Threads: start() opens the socket on the calling thread, so the socket
// lives in that thread's network namespace (tests start nodes inside lab
// namespaces that way). Everything after runs on `io`'s thread: the
// candidate callback, set_peers() and the destructor must be called there
// (or while `io` is not running).
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "crypto/node_id.h"
#include "discovery/lan_discovery_core.h"

namespace yonder::discovery {

struct LanDiscoveryOptions {
  uint16_t link_port = 0;  // this node's peer link port, announced to peers
  std::string group = kMulticastGroup;
  uint16_t port = kDefaultPort;
  // Interfaces by name. Empty: every interface that is up, has an IPv4
  // address and can multicast, loopback excepted.
  std::vector<std::string> interfaces{};
  std::chrono::milliseconds interval{30000};
};

class LanDiscovery {
 public:
  using OnCandidate = std::function<void(const LanCandidate&)>;

  // Binds group:port (shared with other nodes on this host), joins the group
  // on the interfaces and sends the first query. kInvalidArgument for a bad
  // group, port 0 or an unknown interface; kUnavailable when no interface
  // fits or the socket cannot be set up (the message says which step).
  static Result<std::unique_ptr<LanDiscovery>> start(boost::asio::io_context& io, const PublicKeyBytes& self,
                                                     std::vector<PairedPeer> peers, LanDiscoveryOptions options,
                                                     OnCandidate on_candidate);
  // Closes the socket; no callback runs after this returns.
  ~LanDiscovery();
  LanDiscovery(const LanDiscovery&) = delete;
  LanDiscovery& operator=(const LanDiscovery&) = delete;

  // Replaces the paired peers (after a pairing or a deny).
  void set_peers(std::vector<PairedPeer> peers);
  // Asks the LAN again now (two queries, as at start): `yonder netcheck`.
  void query_now();
  // The interfaces joined, by name.
  const std::vector<std::string>& interfaces() const;

  struct Impl;

 private:
  explicit LanDiscovery(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::discovery
