// Fuzzes the config file parser (TOML through toml++, then our checks).
#include <cstdint>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = yonder::config::Config::parse(text, "fuzz.toml");
  if (cfg.ok()) {
    // Whatever parses must serialise to something that parses to the same values.
    auto again = yonder::config::Config::parse(cfg->to_toml(), "again.toml");
    if (!again.ok()) __builtin_trap();
    for (const auto& s : yonder::config::all_settings()) {
      if (cfg->get(s.key) != again->get(s.key)) __builtin_trap();
    }
  } else if (cfg.error().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
