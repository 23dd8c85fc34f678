#include "mesh/core/quorum.h"

#include <algorithm>
#include <map>
#include <set>

namespace yonder::mesh {

QuorumDecision decide_quorum(const std::vector<ReplicaResult>& results) {
  std::map<PeerKey, std::set<std::string>> by_provider;
  for (const auto& r : results) by_provider[r.provider].insert(r.output_hash);
  std::map<std::string, std::vector<PeerKey>> votes;
  std::vector<PeerKey> hedgers;
  for (const auto& [p, hashes] : by_provider) {
    if (hashes.size() == 1) {
      votes[*hashes.begin()].push_back(p);
    } else {
      hedgers.push_back(p);
    }
  }
  QuorumDecision d;
  size_t voters = by_provider.size();
  for (const auto& [hash, who] : votes) {
    if (2 * who.size() > voters) {
      d.accepted = hash;
      d.agreeing = who;
    }
  }
  if (!d.accepted) return d;
  for (const auto& [hash, who] : votes) {
    if (hash != *d.accepted) d.outvoted.insert(d.outvoted.end(), who.begin(), who.end());
  }
  d.outvoted.insert(d.outvoted.end(), hedgers.begin(), hedgers.end());
  std::sort(d.outvoted.begin(), d.outvoted.end());
  return d;
}

}  // namespace yonder::mesh
