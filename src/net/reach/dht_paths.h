// Finding paired peers whose addresses changed, through a DHT
// (discovery.dht: the operator's bootstrap nodes; off by default, so
// nothing leaves the machine unless configured). The record, its sealing
// and the schedule are discovery/locator.h; the DHT node is
// discovery/dht_node.h.
//
// Every second (event loop):
//   - publish: for each paired, not denied peer, this node's addresses (what
//     its share links name) and relays, sealed for that peer alone, at that
//     pair's location of the day; again when they change, when the day
//     changes, and every 10 minutes. A peer that is denied or unpaired gets
//     its record withdrawn.
//   - look up: a peer this node dials (it granted us something) that has
//     had no session for 5 s (the link keeps redialling the addresses it
//     knows meanwhile) is looked up at today's and yesterday's location,
//     at most every 15 s. A record that opens under the pair's key, carries
//     the peer's signature and is newer than the last one used goes to
//     `found` (peer_link.cpp stores its addresses and redials them).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "crypto/identity.h"
#include "discovery/dht_node.h"
#include "discovery/locator.h"

namespace boost::asio {
class io_context;
}

namespace yonder::reach {

class DhtPaths {
 public:
  struct PeerView {
    PublicKeyBytes key{};
    std::string name;
    bool dial = false;       // this node keeps a link to it (it granted us a scope)
    bool connected = false;  // an established session now
  };
  struct Hooks {
    std::function<std::vector<PeerView>()> peers;         // paired, not denied
    std::function<std::vector<std::string>()> addresses;  // where our link listens ("HOST:PORT")
    std::function<std::vector<std::string>()> relays;     // "HOST:PORT@NODE_ID" we are registered with
    std::function<void(const PublicKeyBytes& peer, const discovery::LocatorRecord& record)> found;
  };

  DhtPaths(boost::asio::io_context& io, const Identity& identity, Hooks hooks, discovery::DhtNode::Config config);
  ~DhtPaths();
  DhtPaths(const DhtPaths&) = delete;
  DhtPaths& operator=(const DhtPaths&) = delete;

  Status start();
  void stop();

  // For GET /v1/netcheck: the DHT node (port, nodes known) and what was published.
  nlohmann::json status() const;
  // For GET /v1/peers: the last lookup of `peer` (null if none).
  nlohmann::json peer_state(const PublicKeyBytes& peer) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::reach
