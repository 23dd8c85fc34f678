// Fuzzes the WebSocket frame decoder (api/websocket.h) on a client's bytes:
// the same frames or the same failure whatever the split into reads; the
// buffer stays within one frame; a decoded frame re-encodes (as a server
// frame) to its payload; the handshake checks on the same bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/websocket.h"

using namespace yonder::api::ws;

namespace {

constexpr size_t kMax = 256;

struct Outcome {
  std::vector<std::pair<uint8_t, std::string>> frames;
  uint16_t close_code = 0;
};

Outcome decode(std::string_view bytes, size_t step) {
  Outcome out;
  FrameDecoder d(kMax);
  for (size_t at = 0; at < bytes.size() && out.close_code == 0; at += step) {
    d.feed(bytes.substr(at, step));
    for (;;) {
      auto f = d.next();
      if (!f.ok()) {
        out.close_code = d.close_code();
        if (out.close_code != kCloseProtocolError && out.close_code != kCloseTooBig) __builtin_trap();
        if (d.next().ok()) __builtin_trap();  // stays failed
        break;
      }
      if (!*f) break;
      const Frame& fr = **f;
      if (fr.payload.size() > kMax) __builtin_trap();
      std::string again = encode_frame(fr.opcode, fr.payload);
      if (again.substr(again.size() - fr.payload.size()) != fr.payload) __builtin_trap();
      out.frames.emplace_back(static_cast<uint8_t>(fr.opcode), fr.payload);
    }
    // Undecoded bytes never exceed one frame's header, mask and payload plus a read.
    if (d.buffered() > 14 + kMax + step) __builtin_trap();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Outcome whole = decode(bytes, bytes.size() + 1);
  for (size_t step : {size_t{1}, size_t{7}}) {
    Outcome split = decode(bytes, step);
    if (split.frames != whole.frames || split.close_code != whole.close_code) __builtin_trap();
  }
  UpgradeHeaders h{std::string(bytes), std::string(bytes), std::string(bytes), std::string(bytes)};
  (void)wants_upgrade(h);
  if (check_upgrade(h).ok() && accept_key(h.key).size() != 28) __builtin_trap();
  return 0;
}
