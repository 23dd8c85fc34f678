// Placement: a pure function from a snapshot of what the consumer knows
// (advertisements, path quality, reputation, its credit with each provider,
// leases it already holds) and a job to a ranked plan of providers. No I/O,
// no clock: the snapshot carries `now_ms`. The consumer asks the plan's
// providers for a lease in order (lease.h) and falls through on refusal.
//
// Feasibility (all must hold, else the provider is never ranked):
//  - the advertisement is fresh at now_ms (advertisement_fresh);
//  - at least job.gpus devices are free (not marked leased, not in a lease of
//    the snapshot), each with >= job.vram_bytes and capability >= job's;
//  - every label the job requires is in the advertisement with that value;
//  - if the job names a group, the provider is in it.
//
// Score (higher is better), documented in README.md:
//   expected_start_s = queue_depth * w.seconds_per_queued_job / free_devices
//   score = w.reputation * reputation            (0..1, EigenTrust, normalised)
//         + w.path * path_quality                (0..1)
//         - w.rtt * rtt_ms / 100
//         - w.start * expected_start_s / 60
//         + w.credit * credit / (|credit| + w.credit_scale)   (-1..1)
//         - w.unverified_gpu * (gpu_claim_verified ? 0 : 1)
// The last term weighs down a provider whose GPU models no GPU known-answer
// check of this consumer has confirmed (gpu_claims.h): a forged inventory
// is never feasible-and-free of cost. It shifts every unverified provider
// by the same amount, so among providers all unverified (or all verified)
// the order is what the other terms make it.
// Ties are broken by the provider's key, ascending, so the plan is a total,
// deterministic order whatever the order of the input.
//
// Cost: PlacementIndex sorts the providers by score once per snapshot
// (O(P log P)) and keeps one score-ordered list per label k=v and per group;
// place() walks the shortest list that applies and stops after
// job.max_candidates feasible providers. The free function place() builds
// the index for one query (the reference the index is tested against).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mesh/core/advertisement.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

// What the consumer knows about one provider besides its advertisement.
struct ProviderView {
  Advertisement ad;                 // verified by the caller
  double path_quality = 1.0;        // 0..1: 1 direct, lower via relay or lossy
  double rtt_ms = 0;                // measured round-trip time
  double reputation = 0;            // 0..1 (reputation.h, scaled by the max)
  double credit = 0;                // consumer's balance with this provider, GPU-seconds (ledger.h)
  std::vector<std::string> groups;  // group ids the provider is in (membership.h)
  bool gpu_claim_verified = false;  // every GPU model of `ad` passed this consumer's GPU check (gpu_claims.h)
};

// Devices of `provider` the consumer already holds or was told are held.
struct HeldDevices {
  PeerKey provider{};
  std::vector<uint32_t> devices;
};

struct Snapshot {
  UnixMs now_ms = 0;
  std::vector<ProviderView> providers;  // one per provider; a duplicate keeps the newest ad
  std::vector<HeldDevices> leases;
};

// What a job asks of placement: devices, memory, capability, labels, group
// (the job itself is jobs/protocol/job_request.h's JobRequest).
struct PlacementRequest {
  uint32_t gpus = 1;
  uint64_t vram_bytes = 0;                    // per device
  uint32_t min_capability = 0;                // cuda major*100+minor
  std::map<std::string, std::string> labels;  // all required
  std::optional<std::string> group;
  size_t max_candidates = 8;  // plan length
};

// Defaults favour an early start, then reputation; see README.md.
struct Weights {
  double reputation = 2.0;
  double path = 1.0;
  double rtt = 0.5;
  double start = 1.0;
  double credit = 0.5;
  double unverified_gpu = 1.0;  // as much as a perfect path is worth
  double seconds_per_queued_job = 60.0;
  double credit_scale = 3600.0;
};

struct Candidate {
  PeerKey provider{};
  double score = 0;
  double expected_start_s = 0;
  std::vector<uint32_t> devices;  // the free devices to ask for, lowest index first
  bool operator==(const Candidate&) const = default;
};

struct Plan {
  std::vector<Candidate> ranked;  // best first; empty: nothing feasible
  bool operator==(const Plan&) const = default;
};

// The devices of `view` that fit `job`, or nothing if fewer than job.gpus.
std::optional<std::vector<uint32_t>> feasible_devices(const ProviderView& view, const std::vector<uint32_t>& held,
                                                      const PlacementRequest& job, UnixMs now_ms);

class PlacementIndex {
 public:
  PlacementIndex(const Snapshot& snapshot, const Weights& w);
  Plan place(const PlacementRequest& job) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    const ProviderView* view;
    std::vector<uint32_t> held;
    double score;
    double expected_start_s;
    uint32_t best_capability;  // over free devices
    uint64_t best_memory;      // over free devices
    uint32_t free_count;
  };
  bool try_entry(const Entry& e, const PlacementRequest& job, Plan& plan) const;
  UnixMs now_ms_;
  std::vector<Entry> entries_;                             // best first
  std::map<std::string, std::vector<uint32_t>> by_label_;  // "k=v" -> entry positions, ascending
  std::map<std::string, std::vector<uint32_t>> by_group_;
};

Plan place(const Snapshot& snapshot, const PlacementRequest& job, const Weights& w);

}  // namespace yonder::mesh
