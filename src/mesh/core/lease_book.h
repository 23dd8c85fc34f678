// LeaseBook: a provider's record of which consumer holds which of its
// devices, until when. Pure (takes now_ms), single-threaded (the node's
// event loop owns it). Invariant: a device is in at most one unexpired lease.
//
// A lease that is not renewed by its expiry is gone: grant() and renew()
// collect expired leases first, so an expired holder can never block or
// extend; expire() hands them to the caller (to stop the job, log it) and
// next_deadline() says when to call it next.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "base/error.h"
#include "mesh/core/advertisement.h"
#include "mesh/core/lease.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

struct LeaseGrant {
  uint64_t lease_id = 0;
  PeerKey consumer{};
  std::vector<uint32_t> devices;
  UnixMs expires_at_ms = 0;
  bool operator==(const LeaseGrant&) const = default;
};

class LeaseBook {
 public:
  explicit LeaseBook(uint32_t device_count);

  // Grants `devices` to `consumer` until now + term. kFailedPrecondition if
  // any is held by an unexpired lease; kInvalidArgument for an unknown or
  // repeated device or an empty set.
  Result<LeaseGrant> grant(const PeerKey& consumer, const std::vector<uint32_t>& devices, uint64_t term_ms,
                           UnixMs now_ms);
  // Extends the consumer's unexpired lease to now + term. kNotFound if it
  // expired or is not this consumer's.
  Result<LeaseGrant> renew(uint64_t lease_id, const PeerKey& consumer, uint64_t term_ms, UnixMs now_ms);
  // kNotFound if it is not this consumer's lease (already gone is fine to ignore).
  Status release(uint64_t lease_id, const PeerKey& consumer);
  // Removes and returns the leases expired at now_ms, in lease id order.
  std::vector<LeaseGrant> expire(UnixMs now_ms);
  std::optional<UnixMs> next_deadline() const;

  bool device_free(uint32_t device, UnixMs now_ms) const;
  const std::map<uint64_t, LeaseGrant>& leases() const { return leases_; }
  uint32_t device_count() const { return static_cast<uint32_t>(holder_.size()); }

 private:
  std::vector<uint64_t> holder_;  // per device: lease id, 0 = free
  std::map<uint64_t, LeaseGrant> leases_;
  uint64_t next_id_ = 1;
};

// The provider's answer to an offer: picks free devices of `gpus` that fit
// and grants them, or refuses (kInfeasible if it never could, kBusy now).
// A device with `leased` set is held outside the book and counts as busy.
LeaseMessage answer_offer(LeaseBook& book, const std::vector<GpuOffer>& gpus, const PeerKey& consumer,
                          const LeaseMessage& offer, UnixMs now_ms);

}  // namespace yonder::mesh
