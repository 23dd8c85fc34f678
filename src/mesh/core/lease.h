// Lease messages: how a consumer books devices on a provider so that two
// consumers can never hold the same GPU.
//
// The exchange (over the authenticated peer link, so unsigned):
//   consumer -> provider  offer    {request_id, gpus, vram_bytes, min capability, term_ms, timeout_ms}
//   provider -> consumer  accept   {request_id, lease_id, devices, expires_at_ms}
//                      or refuse   {request_id, reason, retry_after_ms}
//   consumer -> provider  renew    {lease_id, term_ms}   (a heartbeat, every term/3)
//   provider -> consumer  accept   (the renewed expiry)
//   either side           release  {lease_id, reason}
// A consumer that hears nothing within timeout_ms treats the offer as refused
// and falls through its placement plan. A provider that hears no renew
// before expires_at_ms frees the devices (LeaseBook::expire); a consumer
// that gets no renew answer for a whole term requeues the job elsewhere.
//
// Wire form: one JSON object with "kind" and that kind's fields only, at most
// kMaxLeaseMessageBytes. Untrusted input: fuzz/lease_fuzz.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

inline constexpr size_t kMaxLeaseMessageBytes = 4096;
inline constexpr uint64_t kMaxLeaseTermMs = 24ull * 3600 * 1000;

enum class LeaseKind { kOffer, kAccept, kRefuse, kRenew, kRelease };

enum class RefuseReason {
  kBusy,        // the devices are taken now; retry_after_ms says when to try again
  kInfeasible,  // this provider can never run it (too few or too small GPUs)
  kNotAllowed,  // the consumer's scope does not allow mesh jobs here
  kDraining,    // the provider is shutting down
};

enum class ReleaseReason { kDone, kCancelled, kExpired, kEvicted };

struct LeaseMessage {
  LeaseKind kind = LeaseKind::kOffer;
  uint64_t request_id = 0;  // offer, accept, refuse: chosen by the consumer
  uint64_t lease_id = 0;    // accept, renew, release: chosen by the provider
  // offer
  uint32_t gpus = 0;            // 1..64
  uint64_t vram_bytes = 0;      // per device
  uint32_t min_capability = 0;  // cuda major*100+minor
  uint64_t term_ms = 0;         // offer, renew: 1..kMaxLeaseTermMs
  uint64_t timeout_ms = 0;      // offer: how long the consumer waits for an answer
  // accept
  std::vector<uint32_t> devices;  // device indices, 1..64, unique
  UnixMs expires_at_ms = 0;
  // refuse
  RefuseReason refuse_reason = RefuseReason::kBusy;
  uint64_t retry_after_ms = 0;
  // release
  ReleaseReason release_reason = ReleaseReason::kDone;

  bool operator==(const LeaseMessage&) const = default;
};

Result<LeaseMessage> decode_lease_message(std::string_view text);
std::string encode_lease_message(const LeaseMessage& m);

}  // namespace yonder::mesh
