// Fuzzes the lease message decoder (mesh/core/lease.h): never crashes or throws;
// an accepted message re-encodes to text that decodes to the same value.
#include <cstdint>
#include <string_view>

#include "mesh/core/lease.h"

using namespace yonder;
using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = decode_lease_message(in);
  if (!m.ok()) return 0;
  auto again = decode_lease_message(encode_lease_message(*m));
  if (!again.ok() || !(*again == *m)) __builtin_trap();
  return 0;
}
