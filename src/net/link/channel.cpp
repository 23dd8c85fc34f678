#include "net/link/channel.h"

#include <cstdio>

namespace yonder::link {

std::string short_auth_string(Channel& channel) {
  uint8_t out[8];
  if (!channel.export_keying_material("EXPORTER-yonder-short-auth-string", out, sizeof out)) return "unavailable";
  uint64_t v = 0;
  for (uint8_t b : out) v = (v << 8) | b;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03u %03u %03u", static_cast<unsigned>(v % 1000),
                static_cast<unsigned>(v / 1000 % 1000), static_cast<unsigned>(v / 1000000 % 1000));
  return std::string(buf);
}

}  // namespace yonder::link
