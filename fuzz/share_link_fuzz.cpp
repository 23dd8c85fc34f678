// Fuzzes the share link decoder (text pasted by people, so fully untrusted):
// it must never crash, and whatever it accepts must respect the format's bounds.
#include <cstdint>
#include <string_view>

#include "crypto/share_link.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto link = yonder::decode_share_link(text);
  if (link.ok()) {
    if (link->addresses.size() > 8 || link->provider_name.size() > 64) __builtin_trap();
    if (link->addresses.size() + link->relays.size() > 8) __builtin_trap();
    for (const auto& a : link->addresses) {
      if (a.empty() || a.size() > 80 || a.rfind("relay:", 0) == 0) __builtin_trap();
    }
    // v2 relays carry their key and are at most 4; v1 relays carry none.
    if (link->version != 1 && link->version != 2) __builtin_trap();
    if (link->version == 2 && link->relays.size() > 4) __builtin_trap();
    for (const auto& r : link->relays) {
      if (r.address.empty() || r.address.size() > 74) __builtin_trap();
      if (r.key.has_value() != (link->version == 2)) __builtin_trap();
      // What a consumer stores for this relay parses back to the same relay.
      auto back = yonder::relay_of_peer_address(yonder::relay_peer_address(r));
      if (!back.ok() || !back->has_value() || **back != r) __builtin_trap();
    }
  } else if (link.error().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
