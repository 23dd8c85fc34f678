#include "config/config.h"

#include "base/terminal_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

namespace yonder::config {
namespace {

std::string at(const toml::source_region& r, std::string_view origin) {
  return std::string(origin) + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

Error bad_value(const SettingSpec& spec, std::string_view value, const std::string& want) {
  return make_error(ErrorCode::kInvalidArgument, "`" + std::string(spec.key) + "` must be " + want + ", not \"" +
                                                     std::string(value.substr(0, 64)) + "\"");
}

// A toml value in the text form Config stores.
std::optional<std::string> toml_text(const toml::node& node) {
  if (auto s = node.as_string()) return s->get();
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto b = node.as_boolean()) return std::string(b->get() ? "true" : "false");
  return std::nullopt;
}

std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

const char* source_name(Source s) {
  switch (s) {
    case Source::kDefault: return "default";
    case Source::kFile: return "file";
    case Source::kEnv: return "env";
  }
  return "?";
}

EnvFn process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<Paths> resolve_paths(const EnvFn& env) {
  auto nonempty = [&](const char* name) -> std::optional<std::string> {
    auto v = env(name);
    if (v && !v->empty()) return v;
    return std::nullopt;
  };
  auto home_dir = nonempty("HOME");
  Paths p;
  auto yonder_home = nonempty("YONDER_HOME");
  if (yonder_home) {
    p.home = *yonder_home;
  } else if (auto xdg = nonempty("XDG_DATA_HOME")) {
    p.home = *xdg + "/yonder";
  } else if (home_dir) {
    p.home = *home_dir + "/.local/share/yonder";
  } else {
    return make_error(ErrorCode::kFailedPrecondition, "neither YONDER_HOME nor HOME is set; set YONDER_HOME to a folder");
  }
  if (auto c = nonempty("YONDER_CONFIG")) {
    p.config_file = *c;
  } else if (yonder_home) {
    p.config_file = p.home + "/config.toml";
  } else if (auto xdg = nonempty("XDG_CONFIG_HOME")) {
    p.config_file = *xdg + "/yonder/config.toml";
  } else {
    p.config_file = *home_dir + "/.config/yonder/config.toml";
  }
  return p;
}

Paths prefer_system_node(Paths user, const EnvFn& env, const ExistsFn& exists, const std::string& system_home) {
  auto yonder_home = env("YONDER_HOME");
  if (yonder_home && !yonder_home->empty()) return user;  // chosen explicitly
  if (exists(user.key_file())) return user;
  Paths system;
  system.home = system_home;
  if (!exists(system.key_file())) return user;
  auto config = env("YONDER_CONFIG");
  system.config_file = config && !config->empty() ? *config : system.home + "/config.toml";
  return system;
}

Result<std::string> validate_value(const SettingSpec& spec, std::string_view value) {
  switch (spec.type) {
    case SettingType::kInt: {
      int64_t n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || ptr != value.data() + value.size()) return bad_value(spec, value, "an integer");
      return std::to_string(n);
    }
    case SettingType::kBool:
      if (value == "true" || value == "false") return std::string(value);
      return bad_value(spec, value, "true or false");
    case SettingType::kString:
      break;
  }
  if (value.size() > 4096) return bad_value(spec, value.substr(0, 16), "at most 4096 characters");
  // A node's name is shown on its peers' terminals: printable text only.
  if (std::string_view(spec.key) == "node.name" && !value.empty() && !printable_name(value)) {
    return bad_value(spec, terminal_safe(value), "printable text (no control characters or invalid UTF-8)");
  }
  if (!spec.allowed.empty()) {
    std::string_view allowed = spec.allowed;
    while (!allowed.empty()) {
      size_t comma = allowed.find(',');
      if (allowed.substr(0, comma) == value) return std::string(value);
      allowed = comma == std::string_view::npos ? std::string_view{} : allowed.substr(comma + 1);
    }
    return bad_value(spec, value, "one of " + std::string(spec.allowed));
  }
  return std::string(value);
}

Result<Config> Config::parse(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxConfigFileSize) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string(origin) + " is larger than 1 MiB; a Yonder config is a few lines");
  }
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return make_error(ErrorCode::kInvalidArgument,
                      at(e.source(), origin) + ": " + std::string(e.description()) + "; fix the TOML syntax there");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInvalidArgument, std::string(origin) + ": " + e.what());
  }
  Config cfg;
  for (auto&& [table_key, table_node] : root) {
    auto* table = table_node.as_table();
    if (table == nullptr) {
      return make_error(ErrorCode::kInvalidArgument,
                        at(table_node.source(), origin) + ": `" + std::string(table_key.str()) +
                            "` must be a table such as [" + std::string(table_key.str()) +
                            "]; see `yonder config show` for the settings");
    }
    for (auto&& [key, node] : *table) {
      std::string full = std::string(table_key.str()) + "." + std::string(key.str());
      const SettingSpec* spec = find_setting(full);
      if (spec == nullptr) {
        return unknown_setting(full).with_context(at(key.source(), origin));
      }
      auto text_value = toml_text(node);
      bool type_ok = text_value && ((spec->type == SettingType::kString && node.is_string()) ||
                                    (spec->type == SettingType::kInt && node.is_integer()) ||
                                    (spec->type == SettingType::kBool && node.is_boolean()));
      if (!type_ok) {
        const char* want = spec->type == SettingType::kString ? "a string"
                           : spec->type == SettingType::kInt  ? "an integer"
                                                              : "true or false";
        return make_error(ErrorCode::kInvalidArgument,
                          at(node.source(), origin) + ": `" + full + "` must be " + want);
      }
      auto valid = validate_value(*spec, *text_value);
      if (!valid) return Error(valid.error()).with_context(at(node.source(), origin));
      cfg.file_[full] = *valid;
    }
  }
  return cfg;
}

Result<Config> Config::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Config{};
    return make_error(ErrorCode::kPermissionDenied, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::string text;
  text.resize(kMaxConfigFileSize + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse(text, path);
}

Status Config::apply_env(const EnvFn& env) {
  for (const auto& spec : all_settings()) {
    if (spec.env.empty()) continue;
    auto v = env(std::string(spec.env).c_str());
    if (!v) continue;
    auto valid = validate_value(spec, *v);
    if (!valid) return Error(valid.error()).with_context("environment variable " + std::string(spec.env));
    env_[std::string(spec.key)] = *valid;
  }
  return ok_status();
}

Status Config::set(std::string_view key, std::string_view value) {
  const SettingSpec* spec = find_setting(key);
  if (spec == nullptr) {
    return unknown_setting(key);
  }
  auto valid = validate_value(*spec, value);
  if (!valid) return std::move(valid).error();
  file_[std::string(key)] = *valid;
  return ok_status();
}

Status Config::unset(std::string_view key) {
  if (find_setting(key) == nullptr) {
    return unknown_setting(key);
  }
  auto it = file_.find(key);
  if (it != file_.end()) file_.erase(it);
  return ok_status();
}

Source Config::source(std::string_view key) const {
  if (env_.count(key)) return Source::kEnv;
  if (file_.count(key)) return Source::kFile;
  return Source::kDefault;
}

std::string Config::get(std::string_view key) const {
  if (auto it = env_.find(key); it != env_.end()) return it->second;
  if (auto it = file_.find(key); it != file_.end()) return it->second;
  const SettingSpec* spec = find_setting(key);
  if (spec == nullptr) std::abort();  // callers use registered keys only
  return std::string(spec->default_value);
}

int64_t Config::get_int(std::string_view key) const { return std::strtoll(get(key).c_str(), nullptr, 10); }
bool Config::get_bool(std::string_view key) const { return get(key) == "true"; }

std::string Config::to_toml() const {
  std::string out = "# Yonder configuration. Every setting: docs/config.md or `yonder config show`.\n";
  // One [table] per section, in the order sections first appear in the
  // registry: the registry does not keep a section's settings together
  // (api.socket comes long before api.request_timeout_s), and TOML refuses
  // a table defined twice (found by config_fuzz).
  std::vector<std::string> tables;
  std::map<std::string, std::string> body;
  for (const auto& spec : all_settings()) {
    auto it = file_.find(spec.key);
    if (it == file_.end()) continue;
    std::string_view key = spec.key;
    size_t dot = key.find('.');
    std::string table(key.substr(0, dot));
    if (!body.count(table)) tables.push_back(table);
    std::string& text = body[table];
    text += "# " + std::string(spec.doc) + " (default: " + std::string(spec.default_doc) + ")\n";
    text += std::string(key.substr(dot + 1)) + " = " +
            (spec.type == SettingType::kString ? toml_quote(it->second) : it->second) + "\n";
  }
  for (const auto& table : tables) out += "\n[" + table + "]\n" + body[table];
  return out;
}

Status Config::save(const std::string& path) const {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    // Create missing parents (mkdir -p), private to the user.
    for (size_t i = 1; i <= dir.size(); ++i) {
      if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0700);
    }
  }
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(ErrorCode::kPermissionDenied, "cannot write " + tmp + ": " + std::strerror(errno));
  std::string text = to_toml();
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  std::string why = std::strerror(errno);
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::kResourceExhausted, "cannot write " + path + ": " + why);
  }
  return ok_status();
}

}  // namespace yonder::config
