// Membership gossip, sans-I/O: each member pushes the newest membership
// list it holds to `fanout` random other members on every tick, for
// `push_rounds` ticks after it last learned something new (rumour
// mongering, Demers et al. 1987), so a change reaches every member in about
// log(n) rounds and gossip then falls silent. The caller owns the transport
// (the peer links, or the simulated network in tests and bench/mesh_bench)
// and the clock (it calls tick() every gossip interval, ~5 s).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "mesh/core/membership.h"

namespace yonder::mesh {

struct GossipParams {
  size_t fanout = 3;
  int push_rounds = 8;
};

struct GossipSend {
  PeerKey to{};
  Membership membership;
};

class GossipMember {
 public:
  // `random(n)` returns a uniform integer in [0, n): injected, so tests and
  // simulations are deterministic.
  GossipMember(PeerKey self, PeerKey pinned_owner, GossipParams params, std::function<uint64_t(uint64_t)> random);

  // A list from a peer (or from the local admin command). True if adopted.
  bool on_membership(const Membership& m);
  // One gossip interval: whom to send what.
  std::vector<GossipSend> tick();

  const std::optional<Membership>& held() const { return held_; }

 private:
  PeerKey self_;
  PeerKey owner_;
  GossipParams params_;
  std::function<uint64_t(uint64_t)> random_;
  std::optional<Membership> held_;
  int rounds_left_ = 0;
};

}  // namespace yonder::mesh
