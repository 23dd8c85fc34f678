// Fuzzes the mesh advertisement decoder (mesh/core/advertisement.h): never
// crashes or throws; an accepted advertisement re-encodes to text that
// decodes to the same value, and checking its signature and freshness is safe.
#include <cstdint>
#include <string_view>

#include "mesh/core/advertisement.h"

using namespace yonder;
using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto ad = decode_advertisement(in);
  if (!ad.ok()) return 0;
  auto again = decode_advertisement(encode_advertisement(*ad));
  if (!again.ok() || !(*again == *ad)) __builtin_trap();
  (void)verify_advertisement(*ad);
  (void)advertisement_fresh(*ad, 1'800'000'000'000);
  return 0;
}
