#include "jobs/provider/gpu_leases.h"

#include "gpu/inventory.h"

namespace yonder::jobs::provider {

GpuView gpu_view(const gpu::InventoryReport& inventory) {
  GpuView v;
  v.usable = inventory.state == gpu::InventoryState::kOk;
  if (!v.usable) v.unusable_reason = gpu::state_message(inventory);
  for (const auto& dev : inventory.devices) v.devices.push_back({dev.uuid, dev.name, dev.memory_total_bytes});
  return v;
}

LeaseDecision pick_gpus(const GpuView& gpus, const LeaseMap& held, int count, uint64_t min_memory_bytes) {
  LeaseDecision d;
  if (count <= 0) {
    d.fit = Fit::kNow;
    return d;
  }
  if (!gpus.usable) {
    d.reason = "this job asks for " + std::to_string(count) + " GPU(s) but this provider has none to lend: " +
               gpus.unusable_reason;
    return d;
  }
  int big_enough = 0;
  for (const auto& dev : gpus.devices) {
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

LeaseDecision pick_gpus(const gpu::InventoryReport& inventory, const LeaseMap& held, int count,
                        uint64_t min_memory_bytes) {
  return pick_gpus(gpu_view(inventory), held, count, min_memory_bytes);
}

}  // namespace yonder::jobs::provider
