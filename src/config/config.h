// Settings: the registry of every setting with its type, default, environment
// override and documentation; parsing of config.toml (toml++); and where the
// state folder and the config file live.
//
// Precedence, lowest first: built-in default, config file, environment.
// Unknown keys and wrong types are errors with line and column, so a typo
// never silently falls back to a default.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::config {

enum class SettingType { kString, kInt, kBool };

struct SettingSpec {
  std::string_view key;            // "log.level": table "log", key "level"
  SettingType type;
  std::string_view default_value;  // text form; "" for computed defaults
  std::string_view default_doc;    // how the default reads in docs
  std::string_view env;            // environment override, or ""
  std::string_view allowed;        // comma-separated allowed values, or ""
  std::string_view doc;            // one sentence
};

std::span<const SettingSpec> all_settings();
const SettingSpec* find_setting(std::string_view key);
// "unknown setting `KEY`", with the closest setting's name when KEY looks
// like a typo of one, and where to see them all.
Error unknown_setting(std::string_view key);
// Whether a running yonderd applies a new value of `key` at once
// (POST /v1/config/reload); the others wait for its next start.
bool applies_live(std::string_view key);

// Reads an environment variable; injected so tests need not touch the real one.
using EnvFn = std::function<std::optional<std::string>(const char*)>;
EnvFn process_env();

// Where state and config live:
//   home:   $YONDER_HOME, else $XDG_DATA_HOME/yonder, else ~/.local/share/yonder
//   config: $YONDER_CONFIG, else $YONDER_HOME/config.toml when YONDER_HOME is
//           set (one folder per node), else $XDG_CONFIG_HOME/yonder/config.toml
//           or ~/.config/yonder/config.toml
struct Paths {
  std::string home;
  std::string config_file;
  std::string key_file() const { return home + "/identity.key"; }
  std::string database() const { return home + "/state.db"; }
  std::string default_socket() const { return home + "/yonderd.sock"; }
  std::string lock_file() const { return home + "/yonderd.lock"; }
  std::string api_token_file() const { return home + "/api-token"; }
  // Where yonderd writes the loopback API's URL while it listens (clients read it).
  std::string api_url_file() const { return home + "/api-url"; }
};
Result<Paths> resolve_paths(const EnvFn& env);

// The system node: the Debian package's yonderd.service runs with
// YONDER_HOME=/var/lib/yonder (packaging/yonderd.service).
inline constexpr const char* kSystemHome = "/var/lib/yonder";
// For the CLI, not the daemon: when YONDER_HOME is unset and `user` (the
// default folder) holds no node (no identity.key) but `system_home` does,
// the paths of the system node (its config.toml beside it, unless
// YONDER_CONFIG says otherwise); else `user` unchanged. `exists` is injected
// for tests.
using ExistsFn = std::function<bool(const std::string& path)>;
Paths prefer_system_node(Paths user, const EnvFn& env, const ExistsFn& exists,
                         const std::string& system_home = kSystemHome);

enum class Source { kDefault, kFile, kEnv };
const char* source_name(Source s);

constexpr size_t kMaxConfigFileSize = 1 << 20;

class Config {
 public:
  Config() = default;

  // Parses TOML text. `origin` names the file in error messages.
  static Result<Config> parse(std::string_view toml_text, std::string_view origin);
  // Loads a file; a missing file is an empty config, not an error.
  static Result<Config> load(const std::string& path);

  // Applies environment overrides (invalid values are errors naming the variable).
  Status apply_env(const EnvFn& env);

  // Sets a value from its text form, checking key, type and allowed values.
  Status set(std::string_view key, std::string_view value);
  // Removes a value from the file layer (back to default).
  Status unset(std::string_view key);

  // The effective value in text form ("" for an unset computed default).
  std::string get(std::string_view key) const;
  Source source(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  bool get_bool(std::string_view key) const;

  // The file layer as TOML, each set key preceded by its documentation.
  std::string to_toml() const;
  // Atomic write (temporary file, fsync, rename), mode 0600.
  Status save(const std::string& path) const;

 private:
  std::map<std::string, std::string, std::less<>> file_;
  std::map<std::string, std::string, std::less<>> env_;
};

// Checks `value` against `spec`; returns the canonical text form.
Result<std::string> validate_value(const SettingSpec& spec, std::string_view value);

// The reference documentation of every setting, as Markdown (docs/config.md).
std::string settings_markdown();

}  // namespace yonder::config
