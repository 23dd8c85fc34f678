// Verification quorum (BOINC-style redundant execution): a job run on K
// distinct providers is accepted when a strict majority of the replies
// agree on the output hash. A tie or no majority leaves it undecided (run
// more replicas, or ask the user's validator). Providers whose hash lost to
// an accepted one are outvoted and lose reputation (reputation.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mesh/core/types.h"

namespace yonder::mesh {

struct ReplicaResult {
  PeerKey provider{};
  std::string output_hash;
};

struct QuorumDecision {
  std::optional<std::string> accepted;  // the majority's hash, if any
  std::vector<PeerKey> agreeing;        // sorted
  std::vector<PeerKey> outvoted;        // sorted; empty when undecided
};

// A provider counts once: a second, different reply from it makes it
// outvoted whatever the outcome (it is not allowed to hedge). Deterministic.
QuorumDecision decide_quorum(const std::vector<ReplicaResult>& results);

}  // namespace yonder::mesh
