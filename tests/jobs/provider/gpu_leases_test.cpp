#include "jobs/provider/gpu_leases.h"

#include <gtest/gtest.h>

#include "gpu/inventory.h"

namespace yonder::jobs::provider {
namespace {

gpu::InventoryReport inventory(std::vector<uint64_t> gib) {
  gpu::InventoryReport r;
  r.state = gpu::InventoryState::kOk;
  for (size_t i = 0; i < gib.size(); ++i) {
    gpu::GpuDevice d;
    d.index = static_cast<int>(i);
    d.uuid = "GPU-" + std::to_string(i);
    d.memory_total_bytes = gib[i] << 30;
    r.devices.push_back(d);
  }
  return r;
}

TEST(GpuLeases, PicksFreeDevicesNeverHeldOnes) {
  auto inv = inventory({24, 24, 24});
  auto d = pick_gpus(inv, {{"GPU-0", "job-a"}}, 2, 0);
  EXPECT_EQ(d.fit, Fit::kNow);
  EXPECT_EQ(d.uuids, (std::vector<std::string>{"GPU-1", "GPU-2"}));
  auto later = pick_gpus(inv, {{"GPU-0", "a"}, {"GPU-1", "b"}}, 2, 0);
  EXPECT_EQ(later.fit, Fit::kLater);
  EXPECT_TRUE(later.uuids.empty());
}

TEST(GpuLeases, MemoryFloorAndNeverFits) {
  auto inv = inventory({16, 80, 80});
  auto d = pick_gpus(inv, {}, 1, 40ULL << 30);
  EXPECT_EQ(d.uuids, (std::vector<std::string>{"GPU-1"}));
  auto never = pick_gpus(inv, {}, 3, 40ULL << 30);
  EXPECT_EQ(never.fit, Fit::kNever);
  EXPECT_NE(never.reason.find("only 2 such GPU(s)"), std::string::npos) << never.reason;
  EXPECT_EQ(pick_gpus(inv, {}, 4, 0).fit, Fit::kNever);
}

TEST(GpuLeases, NoInventoryMeansNeverWithTheReason) {
  gpu::InventoryReport none;
  none.state = gpu::InventoryState::kNoLibrary;
  auto d = pick_gpus(none, {}, 1, 0);
  EXPECT_EQ(d.fit, Fit::kNever);
  EXPECT_NE(d.reason.find("has none to lend"), std::string::npos);
  EXPECT_EQ(pick_gpus(none, {}, 0, 0).fit, Fit::kNow);  // CPU jobs still run
}

}  // namespace
}  // namespace yonder::jobs::provider
