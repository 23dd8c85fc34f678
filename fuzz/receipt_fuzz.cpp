// Fuzzes the metering receipt decoder (mesh/core/receipt.h): never crashes or
// throws; an accepted receipt re-encodes to text that decodes to the same
// value, and verifying its two signatures is safe.
#include <cstdint>
#include <string_view>

#include "mesh/core/receipt.h"

using namespace yonder;
using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = decode_receipt(in);
  if (!r.ok()) return 0;
  auto again = decode_receipt(encode_receipt(*r));
  if (!again.ok() || !(*again == *r)) __builtin_trap();
  (void)verify_receipt(*r);
  return 0;
}
