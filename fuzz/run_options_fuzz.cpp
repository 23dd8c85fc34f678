// Fuzzes what `yonder run` reads from files: env files (docker's format) and
// job files (TOML). The first byte picks the parser. Never crashes; an env
// file's accepted entries have valid names and values without NUL; a job
// file's ports parse.
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/run_options.h"
#include "exec/env_filter.h"

using namespace yonder;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 64 * 1024) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto env = [](const char* name) -> std::optional<std::string> {
      if (name[0] == 'B') return std::string("from the environment");
      return std::nullopt;
    };
    auto entries = cli::parse_env_file(text, "fuzz.env", env);
    if (!entries) return 0;
    for (const auto& [k, v] : *entries) {
      if (!exec::is_valid_env_name(k) || v.find('\0') != std::string::npos) __builtin_trap();
    }
    return 0;
  }
  auto args = cli::parse_job_file(text, "fuzz.toml", "/jobs");
  if (!args) return 0;
  for (const auto& p : args->ports) {
    if (!cli::parse_port_pair(p)) __builtin_trap();
  }
  for (const auto& kv : args->env) {
    if (kv.find('=') == std::string::npos) __builtin_trap();
  }
  return 0;
}
