// What yonderd nodes tell each other in relay signals (protocol.h: opaque
// to the relay, at most kMaxSignalBytes, only between mutual peers): a
// better path to try. Today one kind, a port the sender mapped on its
// router (UPnP-IGD or NAT-PMP), which the receiver dials to move a relayed
// link there; the pinned TLS handshake decides whether it is really the peer.
//
//   {"v": 1, "mapped": "203.0.113.2:7850"}
//
// Untrusted input: bounded, every field checked, unknown fields ignored.
//
// A hint makes this node dial an address a peer chose, so a hostile peer
// could use it to make us probe our own host or LAN. check_hint_target
// decides, purely, which hints are dialled: never loopback, unspecified,
// link-local, multicast or broadcast addresses, never this host's own
// addresses, private (RFC 1918) and shared (RFC 6598) addresses only when
// the peer's signed share link advertised that host, public ones only when
// the link advertised it or the relay saw the peer connect from it (a
// router maps a port on the address its traffic leaves from); and
// HintRateLimit bounds how often one peer's hints make us dial at all.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "base/token_bucket.h"

namespace yonder::relay {

struct PathHint {
  std::optional<std::string> mapped;  // IPv4 "a.b.c.d:port" the sender's router forwards to it
};

Bytes encode_path_hint(const PathHint& hint);
Result<PathHint> decode_path_hint(ByteView bytes);

struct HintDialContext {
  std::vector<std::string> peer_hosts;      // IPv4 hosts the peer is known at (its share link's addresses)
  std::vector<std::string> own_hosts;       // this host's own IPv4 addresses
  std::vector<std::string> observed_hosts;  // where the peer was seen from (the relay's view of its connection)
};

// ok when this node may dial `endpoint` ("a.b.c.d:port", as decoded) on a
// peer's word; kPermissionDenied naming the rule otherwise.
Status check_hint_target(const std::string& endpoint, const HintDialContext& ctx);

// ok when this node may dial `endpoint` because a pinned peer asked to be
// dialled back there (net/reach/dial_back_core.h): an IPv4 "a.b.c.d:port"
// that is public (not loopback, unspecified, link-local, multicast, private
// or shared) and not one of `own_hosts`. kPermissionDenied naming the rule
// otherwise. Only the pinned TLS handshake with the asking peer's key
// counts as reaching it, and the answer says no more than that, so the
// dial cannot be used to learn what else listens at an address.
Status check_dial_back_target(const std::string& endpoint, const std::vector<std::string>& own_hosts);

// Whether "a.b.c.d:port" is a public IPv4 endpoint in the sense above.
bool is_public_ipv4_endpoint(const std::string& endpoint);

// Per peer: kBurst dials at once, then one per kInterval.
class HintRateLimit {
 public:
  static constexpr int kBurst = 3;
  static constexpr std::chrono::seconds kInterval{10};
  bool allow(MonoTime now) {
    if (!bucket_) bucket_.emplace(1.0 / static_cast<double>(kInterval.count()), kBurst, now);
    return bucket_->take(now);
  }

 private:
  std::optional<TokenBucket> bucket_;
};

}  // namespace yonder::relay
