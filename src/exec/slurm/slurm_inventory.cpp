#include "exec/slurm/slurm_inventory.h"

namespace yonder::exec::slurm {

gpu::InventoryReport SlurmGpuInventory::report(const std::vector<SlurmNodeGpus>& nodes) {
  gpu::InventoryReport r;
  r.source = "slurm";
  int index = 0;
  for (const auto& n : nodes) {
    if (!n.available()) continue;
    for (int i = 0; i < n.total && index < 4096; ++i) {
      gpu::GpuDevice d;
      d.index = index++;
      d.uuid = "GPU-slurm-" + n.node + "-" + std::to_string(i);
      d.name = "Slurm " + (n.type.empty() ? std::string("gpu") : n.type) + " on " + n.node;
      r.devices.push_back(std::move(d));
    }
  }
  r.state = r.devices.empty() ? gpu::InventoryState::kNoDevices : gpu::InventoryState::kOk;
  if (r.devices.empty()) r.detail = "no GPUs on an available node of the Slurm cluster (sinfo -N -O Gres)";
  return r;
}

gpu::InventoryReport SlurmGpuInventory::probe() {
  auto nodes = executor_.gpu_capacity();
  if (!nodes) {
    gpu::InventoryReport r;
    r.source = "slurm";
    r.state = gpu::InventoryState::kError;
    r.detail = nodes.error().to_string();
    return r;
  }
  return report(*nodes);
}

Result<std::vector<gpu::GpuProcess>> SlurmGpuInventory::processes() {
  return make_error(ErrorCode::kFailedPrecondition,
                    "a Slurm provider cannot see per-process GPU memory on the cluster's nodes");
}

}  // namespace yonder::exec::slurm
