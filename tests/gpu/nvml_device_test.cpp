// The NVML inventory against this machine's real libnvidia-ml.
//
// With YONDER_EXPECT_GPU=1 (set on GPU runners) the machine must report a
// working modern GPU. Without it, the test checks that the report agrees
// with what the machine visibly lacks, e.g. no_library where dlopen of the
// library fails. It links nothing beyond libc, libstdc++ and libdl, so the
// binary can be copied to a GPU machine and run there as is.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "gpu/inventory.h"

namespace yonder::gpu {
namespace {

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

bool gpu_expected() {
  const char* value = std::getenv("YONDER_EXPECT_GPU");
  return value != nullptr && std::string(value) == "1";
}

bool library_loads() {
  void* handle = dlopen(kDefaultLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(NvmlDevice, ReportMatchesThisMachine) {
  InventoryReport report = make_nvml_inventory()->probe();
  std::cout << to_json(report).dump(2) << "\n";

  if (gpu_expected()) {
    ASSERT_EQ(report.state, InventoryState::kOk)
        << state_name(report.state) << ": " << state_message(report) << " [" << report.detail
        << "]";
    ASSERT_GE(report.devices.size(), 1u);
    EXPECT_FALSE(report.driver_version.empty());
    EXPECT_FALSE(report.cuda_driver_version.empty());
    for (const GpuDevice& device : report.devices) {
      EXPECT_EQ(device.uuid.rfind("GPU-", 0), 0u) << device.uuid;
      EXPECT_FALSE(device.name.empty());
      EXPECT_GT(device.memory_total_bytes, 1ULL << 30);
      EXPECT_LE(device.memory_used_bytes, device.memory_total_bytes);
      EXPECT_GE(device.compute_major, 7);
      EXPECT_GE(device.utilization_percent, -1);
      EXPECT_LE(device.utilization_percent, 100);
      // Checks the declared nvmlPciInfo_t layout: a misplaced field would
      // yield the 16-byte legacy id or garbage instead of "DDDDDDDD:BB:DD.F".
      EXPECT_EQ(device.pci_bus_id.size(), 16u) << device.pci_bus_id;
    }
    auto round_trip = report_from_json(to_json(report));
    ASSERT_TRUE(round_trip.ok()) << round_trip.error().to_string();
    EXPECT_EQ(*round_trip, report);
    return;
  }

  if (!library_loads()) {
    EXPECT_EQ(report.state, InventoryState::kNoLibrary) << report.detail;
    EXPECT_FALSE(report.detail.empty());
    EXPECT_EQ(state_exit_code(report.state), 10);
    return;
  }
  switch (report.state) {
    case InventoryState::kNoDriver:
    case InventoryState::kNoDevices:
    case InventoryState::kBlockedByOs:
      EXPECT_FALSE(state_message(report).empty());
      return;
    case InventoryState::kError:
      FAIL() << "NVML failed: " << report.detail;
    case InventoryState::kNoLibrary:
      FAIL() << "dlopen worked here but not in the inventory: " << report.detail;
    case InventoryState::kOk:
      GTEST_SKIP() << "this machine has a working GPU; set YONDER_EXPECT_GPU=1 to check it";
  }
}

}  // namespace
}  // namespace yonder::gpu

namespace yonder::gpu {
namespace {

// Per-process accounting (for VRAM limits) against the real driver.
TEST(NvmlDevice, ProcessesMatchThisMachine) {
  auto inventory = make_nvml_inventory();
  InventoryReport report = inventory->probe();
  auto processes = inventory->processes();
  if (report.state != InventoryState::kOk) {
    EXPECT_FALSE(gpu_expected()) << state_message(report);
    EXPECT_FALSE(processes.ok()) << "no working GPU, yet processes() answered";
    if (!processes.ok()) std::cout << "processes(): " << processes.error().to_string() << "\n";
    return;
  }
  ASSERT_TRUE(processes.ok()) << processes.error().to_string();
  std::cout << processes->size() << " compute process(es)\n";
  for (const auto& p : *processes) {
    std::cout << "  " << p.uuid << " pid " << p.pid << " " << (p.used_bytes >> 20) << " MiB\n";
    bool known = false;
    for (const auto& d : report.devices) known = known || d.uuid == p.uuid;
    EXPECT_TRUE(known) << p.uuid;
    EXPECT_GT(p.pid, 0);
  }
}

}  // namespace
}  // namespace yonder::gpu
