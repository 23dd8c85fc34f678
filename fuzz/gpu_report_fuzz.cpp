// Fuzzes the GPU report decoder (JSON from the daemon today, from peers'
// advertisements later): whatever it accepts must round-trip unchanged.
#include <cstdint>
#include <string_view>

#include "gpu/inventory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // the API bounds bodies before parsing
  auto json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded()) return 0;
  auto report = yonder::gpu::report_from_json(json);
  if (report.ok()) {
    auto again = yonder::gpu::report_from_json(yonder::gpu::to_json(*report));
    if (!again.ok() || !(*again == *report)) __builtin_trap();
  }
  return 0;
}
