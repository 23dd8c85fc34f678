#include "mesh/core/gossip.h"

#include <algorithm>

namespace yonder::mesh {

GossipMember::GossipMember(PeerKey self, PeerKey pinned_owner, GossipParams params,
                           std::function<uint64_t(uint64_t)> random)
    : self_(self), owner_(pinned_owner), params_(params), random_(std::move(random)) {}

bool GossipMember::on_membership(const Membership& m) {
  if (judge_membership_update(held_ ? &*held_ : nullptr, owner_, m) != MembershipVerdict::kAccept) return false;
  held_ = m;
  rounds_left_ = params_.push_rounds;
  return true;
}

std::vector<GossipSend> GossipMember::tick() {
  std::vector<GossipSend> out;
  if (!held_ || rounds_left_ <= 0) return out;
  --rounds_left_;
  std::vector<PeerKey> others;
  if (held_->owner != self_) others.push_back(held_->owner);
  for (const auto& m : held_->members) {
    if (m.id != self_ && m.id != held_->owner) others.push_back(m.id);
  }
  // A partial Fisher-Yates shuffle picks `fanout` distinct peers.
  size_t k = std::min(params_.fanout, others.size());
  for (size_t i = 0; i < k; ++i) {
    size_t j = i + static_cast<size_t>(random_(others.size() - i));
    std::swap(others[i], others[j]);
    out.push_back(GossipSend{others[i], *held_});
  }
  return out;
}

}  // namespace yonder::mesh
