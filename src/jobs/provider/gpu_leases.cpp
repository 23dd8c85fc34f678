#include "jobs/provider/gpu_leases.h"

namespace yonder::jobs::provider {

LeaseDecision pick_gpus(const gpu::InventoryReport& inventory, const LeaseMap& held, int count,
                        uint64_t min_memory_bytes) {
  LeaseDecision d;
  if (count <= 0) {
    d.fit = Fit::kNow;
    return d;
  }
  if (inventory.state != gpu::InventoryState::kOk) {
    d.reason = "this job asks for " + std::to_string(count) + " GPU(s) but this provider has none to lend: " +
               gpu::state_message(inventory);
    return d;
  }
  int big_enough = 0;
  for (const auto& dev : inventory.devices) {
    if (dev.memory_total_bytes < min_memory_bytes) continue;
    ++big_enough;
    if (held.count(dev.uuid) == 0 && static_cast<int>(d.uuids.size()) < count) d.uuids.push_back(dev.uuid);
  }
  if (big_enough < count) {
    d.uuids.clear();
    d.reason = "this job asks for " + std::to_string(count) + " GPU(s)" +
               (min_memory_bytes > 0 ? " with at least " + std::to_string(min_memory_bytes >> 20) + " MiB each" : "") +
               " but this provider has only " + std::to_string(big_enough) + " such GPU(s)";
    return d;
  }
  if (static_cast<int>(d.uuids.size()) < count) {
    d.uuids.clear();
    d.fit = Fit::kLater;
    d.reason = "waiting for a GPU held by another job";
    return d;
  }
  d.fit = Fit::kNow;
  return d;
}

}  // namespace yonder::jobs::provider
