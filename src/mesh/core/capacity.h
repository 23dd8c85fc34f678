// What the mesh tells a person: the labels a provider is configured with,
// why a provider ranked where it did (the score's parts), and why nothing
// was feasible. Pure; used by yonderd's mesh wiring (src/node/mesh_*.h) and
// the CLI.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/error.h"
#include "mesh/core/placement.h"

namespace yonder::mesh {

// "k=v,k2=v2" (spaces around items ignored; "" is no labels). Keys and
// values as the advertisement codec accepts them: [A-Za-z0-9._/:-], at most
// 63 characters each, values may hold '=' too, at most 32 labels, no key twice.
Result<std::map<std::string, std::string>> parse_labels(std::string_view text);

// The terms of placement's score for one provider (placement.h), each
// already weighted, so that total == the sum of the others.
struct ScoreParts {
  double reputation = 0;
  double path = 0;
  double rtt = 0;     // <= 0
  double start = 0;   // <= 0
  double credit = 0;
  double unverified = 0;  // <= 0: -w.unverified_gpu when the GPU claim is unverified
  double total = 0;
};
ScoreParts score_parts(const ProviderView& view, double expected_start_s, const Weights& w);
// "score 1.23 = reputation 0.00 + path 1.00 - rtt 0.01 - start 0.00 + credit 0.25",
// then " - unverified GPU 1.00" when that term is not zero.
std::string describe_score(const ScoreParts& parts);

// "2 free GPUs with 24 GiB, compute capability 8.0 and label site=lab2"
std::string describe_request(const PlacementRequest& job);
// The error a consumer gets when the plan is empty: kFailedPrecondition,
// "no paired provider has <request>; `yonder mesh` shows what there is".
// `providers` is how many advertisements the snapshot had (0 says so).
Error nothing_feasible(const PlacementRequest& job, size_t providers);

}  // namespace yonder::mesh
