// What `yonder config show` and `get` say of a setting while yonderd runs:
// the value the daemon uses and where it came from, and what the file says
// now when that differs (it applies at the daemon's next start). Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace yonder::cli {

struct SettingLine {
  std::string key;
  std::string value;   // in use: the daemon's, or (no daemon) what it would start with
  std::string source;  // default, file or env, as the daemon (or this shell) resolved it
  // The file's value when it differs from the daemon's and would take its
  // place at the next start (never when the daemon's value came from its
  // environment, which the file does not override).
  std::optional<std::string> on_restart;
};

// One line per setting. `running`: GET /v1/config's answer ({"settings":
// [{"key", "value", "source"}]}), or null when no daemon answered: then
// `here` (the file with this shell's environment) is what it would use.
// `file`: the file alone.
std::vector<SettingLine> setting_lines(const config::Config& here, const config::Config& file,
                                       const nlohmann::json& running);

}  // namespace yonder::cli
