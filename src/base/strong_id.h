// Distinct types for ids that would otherwise all be strings or integers,
// so a JobId cannot be passed where a PeerId is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <utility>

namespace yonder {

template <typename Tag, typename Rep = std::string>
class StrongId {
 public:
  StrongId() = default;
  explicit StrongId(Rep value) : value_(std::move(value)) {}
  const Rep& value() const { return value_; }
  auto operator<=>(const StrongId&) const = default;

 private:
  Rep value_{};
};

// A job's id where it runs: 16 hex characters the provider chose.
using JobId = StrongId<struct JobIdTag>;
// A peer's node id in its display form (crypto/node_id.h).
using PeerId = StrongId<struct PeerIdTag>;
// A mesh lease's number, chosen by the provider that granted it (mesh/core/lease.h).
using LeaseId = StrongId<struct LeaseIdTag, uint64_t>;
// A mesh job's id on the consumer that supervises it (mesh/jobs/mesh_jobs.h).
using MeshJobId = StrongId<struct MeshJobIdTag>;

}  // namespace yonder
