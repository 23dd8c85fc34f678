// Fuzzes the node id decoder: anything it accepts must re-encode to a
// canonical form that decodes to the same key.
#include <cstdint>
#include <string_view>

#include "crypto/node_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto id = yonder::NodeId::parse(text);
  if (id.ok()) {
    auto again = yonder::NodeId::parse(id->to_string());
    if (!again.ok() || !(*again == *id)) __builtin_trap();
  }
  return 0;
}
