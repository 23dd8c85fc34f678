// Fuzzes the relay's control messages both ways: bytes cut into the reads
// the first input byte chooses, through the bounded ControlReader, then
// every complete message through both decoders (a relay decodes what nodes
// send, a node what relays send). Accepted messages must re-encode to
// something that decodes to the same thing.
#include <cstdint>

#include "relay/protocol.h"

using namespace yonder;
using namespace yonder::relay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 64;
  ControlReader reader;
  for (size_t off = 1; off < size; off += chunk) {
    size_t n = std::min(chunk, size - off);
    reader.feed(ByteView(data + off, n));
    for (;;) {
      auto msg = reader.next();
      if (!msg.ok() || !*msg) break;
      const nlohmann::json& j = **msg;
      if (auto c = decode_client_message(j); c.ok()) {
        auto again = decode_client_message(to_json(*c));
        if (!again.ok() || to_json(*again) != to_json(*c)) __builtin_trap();
      }
      if (auto r = decode_relay_message(j); r.ok()) {
        auto again = decode_relay_message(to_json(*r));
        if (!again.ok() || to_json(*again) != to_json(*r)) __builtin_trap();
      }
    }
    if (reader.buffered() > kMaxControlMessageBytes + 4 + 64) __builtin_trap();
  }
  return 0;
}
