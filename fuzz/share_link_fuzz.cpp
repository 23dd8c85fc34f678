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
    for (const auto& a : link->addresses) {
      if (a.empty() || a.size() > 80) __builtin_trap();
    }
  } else if (link.error().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
