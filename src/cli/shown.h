// Every string a peer chose (a provider's name, a job's file names, its
// messages) goes through here before it reaches our terminal: control
// characters become visible escapes (base/terminal_text.h). A test
// (tests/cli/shown_test.cpp) checks that the CLI prints peer-named fields
// only through shown().
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/terminal_text.h"

namespace yonder::cli {

// j[key] as a string made safe to print; `fallback` (ours, unescaped) when
// it is missing or not a string.
inline std::string shown(const nlohmann::json& j, const char* key, const std::string& fallback) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return fallback;
  return terminal_safe(j[key].get<std::string>());
}

inline std::string shown(const std::string& s) { return terminal_safe(s); }

}  // namespace yonder::cli
