// Fuzzes the path hints yonderd nodes send each other in relay signals
// (relay/path_hint.h). An accepted hint re-encodes to one that decodes the same.
#include <cstdint>

#include "relay/path_hint.h"

using namespace yonder;
using namespace yonder::relay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = decode_path_hint(ByteView(data, size));
  if (h.ok()) {
    Bytes again = encode_path_hint(*h);
    auto back = decode_path_hint(again);
    if (!back.ok() || back->mapped != h->mapped) __builtin_trap();
  }
  return 0;
}
