// The DHT a node uses to find its paired peers when their addresses
// changed (discovery.dht; opt-in, off by default): an OpenDHT node
// (Debian's libopendht) with its own UDP socket and thread, in Yonder's own
// DHT network (network id kYonderDhtNetwork, so it never merges with
// another OpenDHT network it is pointed at by mistake), bootstrapped only to
// the nodes the operator named. It stores and finds opaque values at
// 20-byte locations; what they are is locator.h's business (sealed, per
// pair, nothing in the clear).
//
// Values a node puts stay announced while it runs (OpenDHT re-announces
// them before they expire, 10 minutes); a new put at a location withdraws
// this node's previous value there. Every callback arrives on the caller's
// io_context, never on OpenDHT's thread, and not after stop().
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "discovery/locator.h"

namespace yonder::discovery {

inline constexpr uint32_t kYonderDhtNetwork = 0x594f4e44;  // "YOND"

class DhtNode {
 public:
  struct Config {
    std::string listen;                  // "IP:PORT" for the UDP socket (port 0: any)
    std::vector<std::string> bootstrap;  // "HOST:PORT" of DHT nodes to join through
  };
  struct Stats {
    uint16_t port = 0;
    unsigned good = 0, dubious = 0;  // IPv4 routing table
  };

  // kInvalidArgument for a bad address; kUnavailable when the socket cannot
  // be opened.
  static Result<std::unique_ptr<DhtNode>> start(boost::asio::io_context& io, const Config& config);
  ~DhtNode();
  DhtNode(const DhtNode&) = delete;
  DhtNode& operator=(const DhtNode&) = delete;

  // Stores `value` at `location` (at most kMaxLocatorValueBytes), replacing
  // what this node put there before; `done` hears whether some node stored it.
  void put(const LocatorLocation& location, Bytes value, std::function<void(bool stored)> done);
  // Withdraws what this node put at `location`.
  void withdraw(const LocatorLocation& location);
  // The values found at `location` (those over the size bound dropped).
  void get(const LocatorLocation& location, std::function<void(std::vector<Bytes>)> done);
  Stats stats() const;
  void stop();

  struct Impl;

 private:
  explicit DhtNode(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::discovery
