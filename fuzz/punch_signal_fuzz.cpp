// Fuzzes what peers send for hole punching: the signals through the relay
// (net/punch/signal.h) and the probes and acks over UDP (punch_packet.h).
// An accepted signal re-encodes to what decodes to the same signal, and that
// encoding is a fixed point (a version-1 signal, or one with flag bits this
// version does not know, re-encodes to the current form, not its own bytes).
#include <cstdint>

#include "net/punch/punch_packet.h"
#include "net/punch/signal.h"

using namespace yonder;
using namespace yonder::punch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView in(data, size);
  auto s = decode_punch_signal(in);
  if (s.ok()) {
    Bytes again = encode_punch_signal(*s);
    auto back = decode_punch_signal(again);
    if (!back.ok() || *back != *s) __builtin_trap();
    if (encode_punch_signal(*back) != again) __builtin_trap();
  }
  if (auto p = decode_punch_packet(in)) {
    Bytes again = encode_punch_packet(*p);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
  }
  (void)classify_datagram(in);
  return 0;
}
