// Which GPU a job gets: exclusive leases of whole devices by UUID. Pure (no
// I/O): the caller passes the inventory and the leases held, and persists
// the result (the job_gpu_leases table's primary key on the UUID is the
// second lock: one device can never be written down for two jobs).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu/inventory.h"

namespace yonder::jobs::provider {

// uuid -> job id holding it.
using LeaseMap = std::map<std::string, std::string>;

enum class Fit {
  kNow,    // devices are free: `pick` returns them
  kLater,  // enough devices exist but some are held: wait in the queue
  kNever,  // this provider can never satisfy the request
};

struct LeaseDecision {
  Fit fit = Fit::kNever;
  std::vector<std::string> uuids;  // when kNow, in inventory order
  std::string reason;              // when kNever or kLater, for the user
};

// `count` devices with at least `min_memory_bytes` each, none in `held`.
LeaseDecision pick_gpus(const gpu::InventoryReport& inventory, const LeaseMap& held, int count,
                        uint64_t min_memory_bytes);

}  // namespace yonder::jobs::provider
