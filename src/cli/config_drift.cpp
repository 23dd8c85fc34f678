#include "cli/config_drift.h"

#include <map>


namespace yonder::cli {

std::vector<SettingLine> setting_lines(const config::Config& here, const config::Config& file,
                                       const nlohmann::json& running) {
  std::map<std::string, std::pair<std::string, std::string>> used;  // key -> value, source
  if (running.is_object() && running.contains("settings") && running["settings"].is_array()) {
    for (const auto& s : running["settings"]) {
      if (!s.is_object() || !s.contains("key") || !s["key"].is_string()) continue;
      auto text = [&](const char* k) { return s.contains(k) && s[k].is_string() ? s[k].get<std::string>() : ""; };
      used[text("key")] = {text("value"), text("source")};
    }
  }
  bool daemon = !used.empty();
  std::vector<SettingLine> out;
  for (const auto& spec : config::all_settings()) {
    std::string key(spec.key);
    SettingLine line{key, here.get(key), config::source_name(here.source(key)), std::nullopt};
    if (daemon) {
      auto it = used.find(key);
      if (it == used.end()) {  // a setting newer than the running daemon
        line.value = "";
        line.source = "unknown to the running yonderd";
      } else {
        line.value = it->second.first;
        line.source = it->second.second;
        if (line.source != "env" && file.get(key) != line.value) line.on_restart = file.get(key);
      }
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace yonder::cli
