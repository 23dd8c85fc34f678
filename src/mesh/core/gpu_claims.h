// What this consumer believes of a provider's GPU claims: the models its
// signed advertisement names are only claims (a provider writes its own
// advertisement: 64 x H100 costs it nothing), until a GPU known-answer
// check (benchmark.h's gpu_benchmark_command, run by this node) has passed
// on that model. Placement weighs unverified claims down (placement.h)
// and `yonder mesh` shows each model as verified, unverified or failed.
//
// Only this node's own checks count: a check is a job this node ran and
// whose answer it compared itself. Peers' checks reach reputation through
// mesh.opinions (reputation.h), never the claim, so a peer that vouches for
// a friend cannot make its GPUs look real here.
//
// The newest check of a (provider, model) decides: a GPU that passed and
// later failed (swapped, broken, lying) is failed until it passes again.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "mesh/core/advertisement.h"
#include "mesh/core/types.h"
#include "mesh/core/verification.h"

namespace yonder::mesh {

enum class GpuClaim { kUnverified, kVerified, kFailed };
const char* gpu_claim_name(GpuClaim c);  // "unverified" | "verified" | "failed"

struct GpuCheck {
  std::string provider_id;  // the provider, as the caller names it (a node id)
  std::string model;        // the model the advertisement claimed when the check ran
  bool passed = false;
  UnixMs at_ms = 0;
};

// A GPU check from a recorded known-answer verification: its details say
// {"gpu": true, "gpu_model": "<model>"}. The CPU check, replicas and
// receipts are nullopt: they say nothing about a GPU.
std::optional<GpuCheck> gpu_check_of(std::string provider_id, CheckKind kind, CheckOutcome outcome,
                                      const nlohmann::json& details, UnixMs at_ms);

class GpuClaims {
 public:
  // The newest check of each (provider, model) wins; at the same time, a failure.
  void add(GpuCheck check);
  GpuClaim claim(std::string_view provider_id, std::string_view model) const;
  // Every model `ad` names has a passing check; false when it names no GPU.
  bool verified(std::string_view provider_id, const Advertisement& ad) const;

 private:
  std::map<std::pair<std::string, std::string>, GpuCheck, std::less<>> latest_;
};

}  // namespace yonder::mesh
