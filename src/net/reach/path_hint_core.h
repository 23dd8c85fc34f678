// Path hints without I/O (relay/path_hint.h has the format and the rules
// for what may be dialled): when this node tells a peer about its mapped
// port, and what it does with a hint a peer sends. mapped_paths.h owns one
// PathHintCore on the event loop, gathers the facts and does what the
// answers say (a relay signal out; LinkService::try_path with path
// "mapped" in).
//
// Sending: a peer whose session runs over a path worse than a mapped port
// (a relay or a punched path) hears of the mapped address, when this node
// has one (the router forwards it to our link port).
//
// Receiving, in two steps so that a flood of hints costs no more than a map
// lookup: admit() first (the hint names a mapped address, the peer granted
// this node a scope, since only the side that keeps the link up dials, as on
// the LAN; and the peer's HintRateLimit at `now` has a token), then, with
// this host's own addresses gathered only for an admitted hint, target()
// (relay::check_hint_target: never our own host, loopback and the like;
// private addresses only when the peer's share link named them).
//
// No timer: a hint over the rate is dropped, never deferred, so there is no
// next deadline. Never touches a socket, a clock or a thread; event loop
// only (not thread-safe).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "crypto/node_id.h"
#include "net/reach/path_kind.h"
#include "relay/path_hint.h"

namespace yonder::reach {

// The hint to send a peer whose session runs on `path`: our mapped address
// ("ip:port"; empty while the router maps nothing); nullopt: none to send.
std::optional<relay::PathHint> hint_to_send(const std::string& mapped, PathKind path);

struct HintVerdict {
  enum class Kind {
    kDial,         // target(): dial `detail` with path "mapped"; admit(): go on to target()
    kIgnore,       // not for us to act on (no mapped address, or we do not keep the link up); silent
    kRateLimited,  // over the peer's rate: `detail` is the address it named
    kRefused,      // check_hint_target said no: `detail` is its message
  };
  Kind kind = Kind::kIgnore;
  std::string detail;
};

class PathHintCore {
 public:
  // Step 1 for a hint from the pinned peer `from`: `grants_us` whether it
  // granted this node a scope. Spends a token of `from`'s rate limit when
  // the hint names an address and we would dial it.
  HintVerdict admit(const PublicKeyBytes& from, const relay::PathHint& hint, bool grants_us, MonoTime now);
  // Step 2, for an admitted hint's address.
  static HintVerdict target(const std::string& mapped, const relay::HintDialContext& ctx);

 private:
  std::map<PublicKeyBytes, relay::HintRateLimit> limits_;  // per pinned peer that sent a hint
};

}  // namespace yonder::reach
