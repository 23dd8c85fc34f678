// Which GPU a job gets: exclusive leases of whole devices by UUID. Pure (no
// I/O, nothing that locks or reads a clock): the caller passes the devices
// as it probed them and the leases held, and persists the result (the
// job_gpu_leases table's primary key on the UUID is the second lock: one
// device can never be written down for two jobs).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace yonder::gpu {
struct InventoryReport;
}

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

// One device as the caller's probe saw it.
struct GpuSlot {
  std::string uuid;
  std::string name;  // the model, for the receipt ("" when unknown)
  uint64_t memory_total_bytes = 0;

  bool operator==(const GpuSlot&) const = default;
};

// The devices this provider can lend, as probed (gpu::GpuInventory).
struct GpuView {
  bool usable = false;          // the probe found devices and every query answered
  std::string unusable_reason;  // when not: what is wrong and what to do (gpu::state_message)
  std::vector<GpuSlot> devices; // in inventory order

  bool operator==(const GpuView&) const = default;
};

// The report as the decisions below read it.
GpuView gpu_view(const gpu::InventoryReport& inventory);

// `count` devices with at least `min_memory_bytes` each, none in `held`:
// the first free ones in inventory order.
LeaseDecision pick_gpus(const GpuView& gpus, const LeaseMap& held, int count, uint64_t min_memory_bytes);
LeaseDecision pick_gpus(const gpu::InventoryReport& inventory, const LeaseMap& held, int count,
                        uint64_t min_memory_bytes);

}  // namespace yonder::jobs::provider
