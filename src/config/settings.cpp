#include <array>

#include "config/config.h"

namespace yonder::config {
namespace {

using T = SettingType;

// Adding a setting: add it here (the docs and `yonder config show` follow).
constexpr std::array kSettings = {
    SettingSpec{"node.name", T::kString, "", "the host name", "YONDER_NAME", "",
                "Name shown to peers and in `yonder status`."},
    SettingSpec{"log.level", T::kString, "info", "info", "YONDER_LOG_LEVEL", "trace,debug,info,warn,error",
                "Daemon log verbosity."},
    SettingSpec{"log.format", T::kString, "auto", "auto", "YONDER_LOG_FORMAT", "auto,text,json",
                "Daemon log format: human text, JSON lines, or auto (text on a terminal, JSON otherwise)."},
    SettingSpec{"api.socket", T::kString, "", "$YONDER_HOME/yonderd.sock", "YONDER_API_SOCKET", "",
                "Unix socket of the local API (created mode 0600)."},
    SettingSpec{"executor.backend", T::kString, "docker", "docker", "YONDER_EXECUTOR", "docker,slurm,none",
                "Where jobs run: the local Docker engine, a Slurm cluster, or nowhere (consumer only)."},
    SettingSpec{"docker.socket", T::kString, "/var/run/docker.sock", "/var/run/docker.sock", "YONDER_DOCKER_SOCKET",
                "", "Docker Engine API socket (Podman's compatible socket works too)."},
    SettingSpec{"gpu.inventory", T::kString, "nvml", "nvml", "YONDER_GPU_INVENTORY", "",
                "GPU inventory: `nvml`, `nvml:/path/to/libnvidia-ml.so.1`, or `fake:N` (tests only: N fake GPUs, "
                "clearly labelled FAKE)."},
    SettingSpec{"api.request_timeout_s", T::kInt, "30", "30", "", "",
                "Seconds the local API waits for a request before closing the connection."},
};

}  // namespace

std::span<const SettingSpec> all_settings() { return kSettings; }

const SettingSpec* find_setting(std::string_view key) {
  for (const auto& s : kSettings) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

std::string settings_markdown() {
  std::string out =
      "# Configuration reference\n\n"
      "Generated from `src/config/settings.cpp`; `yonder config show` prints the effective values.\n\n"
      "The file is TOML: `log.level` is the key `level` in the table `[log]`. Precedence, lowest first: default, "
      "config file, environment variable.\n\n"
      "| setting | type | default | environment | allowed | meaning |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& s : kSettings) {
    const char* type = s.type == T::kString ? "string" : s.type == T::kInt ? "integer" : "boolean";
    out += "| `" + std::string(s.key) + "` | " + type + " | " + std::string(s.default_doc) + " | " +
           (s.env.empty() ? "" : "`" + std::string(s.env) + "`") + " | " + std::string(s.allowed) + " | " +
           std::string(s.doc) + " |\n";
  }
  return out;
}

}  // namespace yonder::config
