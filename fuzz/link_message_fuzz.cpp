// Fuzzes the link's message reader (length-prefixed JSON from peers), fed in
// the chunk sizes the first input byte chooses, as a TLS stream would split it.
#include <cstdint>

#include "net/link/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 64;
  yonder::link::MessageReader reader;
  for (size_t off = 1; off < size; off += chunk) {
    size_t n = std::min(chunk, size - off);
    reader.feed(yonder::ByteView(data + off, n));
    for (;;) {
      auto msg = reader.next();
      if (!msg.ok() || !*msg) break;
      if (!(*msg)->is_object()) __builtin_trap();
    }
    if (reader.buffered() > 2 * yonder::link::kMaxMessageBytes + 64) __builtin_trap();
  }
  return 0;
}
