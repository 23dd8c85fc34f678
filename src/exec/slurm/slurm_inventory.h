// The GPU inventory of a Slurm provider: the cluster's GPUs as sinfo
// reports them (Gres=gpu:N per node), so `yonder gpu`, the status route and
// the job manager's leases count what Slurm can place, not the head node's
// own devices. Each GPU is a numbered slot ("GPU-slurm-<node>-<i>"): Slurm
// picks the physical device when it runs the job, and sets the job's
// CUDA_VISIBLE_DEVICES itself. Source "slurm"; GPUs on down or drained nodes
// are left out. Per-process memory is not visible from here, so processes()
// says so (VRAM limits are then reported as not enforced).
#pragma once

#include "exec/slurm/slurm_executor.h"
#include "gpu/inventory.h"

namespace yonder::exec::slurm {

class SlurmGpuInventory final : public gpu::GpuInventory {
 public:
  // `executor` runs sinfo; it must outlive this inventory.
  explicit SlurmGpuInventory(SlurmExecutor& executor) : executor_(executor) {}
  gpu::InventoryReport probe() override;
  Result<std::vector<gpu::GpuProcess>> processes() override;

  // Pure: the report for sinfo's nodes (for tests).
  static gpu::InventoryReport report(const std::vector<SlurmNodeGpus>& nodes);

 private:
  SlurmExecutor& executor_;
};

}  // namespace yonder::exec::slurm
