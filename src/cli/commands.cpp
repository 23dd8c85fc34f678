#include "cli/commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli/config_drift.h"
#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/peer_offer.h"
#include "cli/shown.h"
#include "gpu/inventory.h"
#include "os/terminal.h"
#include "state/node_state.h"

namespace yonder::cli {
namespace {

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

std::string format_duration(int64_t s) {
  char buf[64];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400), static_cast<long long>(s / 3600 % 24));
  return buf;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// Reads a daemon reply as JSON with the expected top-level shape.
Result<nlohmann::json> reply_json(const DaemonReply& reply) {
  if (reply.status != 200) return daemon_error(reply);
  auto j = nlohmann::json::parse(reply.body, nullptr, false);
  if (!j.is_object()) return make_error(ErrorCode::kInternal, "yonderd sent a reply that is not a JSON object");
  return j;
}

}  // namespace

int cmd_init(Context& ctx, const InitArgs& args) {
  state::InitOptions options;
  options.name = args.name;
  if (args.passphrase) {
    auto p = state::find_passphrase(ctx.env, false);
    if (!p) return print_error(p.error(), kExitError);
    if (*p) {
      options.passphrase = **p;
    } else {
      auto first = os::read_secret("New passphrase for the identity key: ");
      if (!first) {
        return print_error(make_error(ErrorCode::kUnavailable,
                                      "no terminal to ask for a passphrase; set YONDER_PASSPHRASE for unattended use"),
                           kExitError);
      }
      auto second = os::read_secret("Repeat the passphrase: ");
      if (!second || *second != *first) {
        return print_error(make_error(ErrorCode::kInvalidArgument, "the passphrases differ; run init again"),
                           kExitError);
      }
      options.passphrase = *first;
    }
  }
  auto r = state::init_node(ctx.paths, ctx.cfg, options);
  if (!r) return print_error(r.error(), r.error().code() == ErrorCode::kAlreadyExists ? kExitExists : kExitError);
  if (ctx.json) {
    print_json({{"node_id", r->node_id.to_string()}, {"key_file", r->key_file}, {"encrypted", r->encrypted},
                {"home", ctx.paths.home}});
    return kExitOk;
  }
  std::printf("Created the identity of this node.\n\n  Node id  %s\n  Key      %s (%s)\n  State    %s\n\n",
              r->node_id.to_string().c_str(), r->key_file.c_str(),
              r->encrypted ? "encrypted with your passphrase" : "mode 0600, not encrypted", ctx.paths.home.c_str());
  std::printf("Next: start the daemon with `yonderd &`, then `yonder status`.\n");
  return kExitOk;
}

int cmd_status(const Context& ctx) {
  auto reply = call_daemon(ctx, "GET", "/v1/status");
  if (!reply) return report_daemon_error(ctx, reply.error());
  auto j = reply_json(*reply);
  if (!j) return print_error(j.error(), kExitError);
  if (ctx.json) {
    print_json(*j);
    return kExitOk;
  }
  std::string backends;
  for (const auto& b : j->value("backends", nlohmann::json::array())) {
    if (!b.is_string()) continue;
    backends += (backends.empty() ? "" : ", ") + b.get<std::string>();
  }
  std::printf("Node      %s\n", j->value("node_id", "?").c_str());
  std::printf("Name      %s\n", shown(*j, "name", "?").c_str());
  std::printf("Daemon    yonderd %s, pid %lld, up %s\n", j->value("version", "?").c_str(),
              static_cast<long long>(j->value("pid", 0)), format_duration(j->value("uptime_s", int64_t{0})).c_str());
  std::printf("Backends  %s\n", backends.c_str());
  std::printf("GPUs      %s (details: yonder gpu)\n", j->value("gpu_inventory", "?").c_str());
  std::printf("Peers     %lld\n", static_cast<long long>(j->value("peers", 0)));
  std::string api_url = j->value("api_url", "");
  std::printf("API       %s\n", api_url.empty() ? "unix socket only (api.listen is off)" : api_url.c_str());
  std::printf("State     %s\n", j->value("home", "?").c_str());
  return kExitOk;
}

int cmd_gpu(const Context& ctx, const std::string& peer) {
  if (!peer.empty()) {
    auto offer = api(ctx, "GET", "/v1/peers/offer?peer=" + query_escape(peer));
    if (!offer) {
      Error e = offer.error();
      if (e.message().find("unknown method") != std::string::npos) {
        e = make_error(ErrorCode::kFailedPrecondition,
                       peer + " runs an older yonder that cannot say what it has; ask its owner to upgrade, or try "
                              "`yonder run --on " + peer + " ...`");
      }
      return fail(ctx, e);
    }
    if (ctx.json) {
      print_json(*offer);
    } else {
      std::fputs(offer_text(*offer).c_str(), stdout);
    }
    return kExitOk;
  }
  auto reply = call_daemon(ctx, "GET", "/v1/gpus");
  if (!reply) return report_daemon_error(ctx, reply.error());
  auto j = reply_json(*reply);
  if (!j) return print_error(j.error(), kExitError);
  auto report = gpu::report_from_json(*j);
  if (!report) return print_error(Error(report.error()).with_context("reading yonderd's GPU report"), kExitError);
  int code = gpu::state_exit_code(report->state);
  if (ctx.json) {
    print_json(*j);
    return code;
  }
  if (report->state != gpu::InventoryState::kOk) {
    std::fprintf(stderr, "yonder: no usable GPU (%s): %s\n", gpu::state_name(report->state),
                 gpu::state_message(*report).c_str());
    if (!report->detail.empty()) std::fprintf(stderr, "        detail: %s\n", report->detail.c_str());
    return code;
  }
  bool fake = report->source == "fake";
  std::printf("%-4s %-28s %-17s %-5s %-8s %s\n", "GPU", "NAME", "MEMORY (GiB)", "UTIL", "COMPUTE", "UUID");
  for (const auto& d : report->devices) {
    std::string mem = gib(d.memory_used_bytes) + " / " + gib(d.memory_total_bytes);
    std::string util = d.utilization_percent < 0 ? "-" : std::to_string(d.utilization_percent) + "%";
    std::string cc = std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor);
    std::printf("%-4d %-28s %-17s %-5s %-8s %s\n", d.index, d.name.c_str(), mem.c_str(), util.c_str(), cc.c_str(),
                d.uuid.c_str());
  }
  std::printf("\nDriver %s, CUDA %s, source %s%s\n", report->driver_version.empty() ? "-" : report->driver_version.c_str(),
              report->cuda_driver_version.empty() ? "-" : report->cuda_driver_version.c_str(), report->source.c_str(),
              fake ? " (FAKE inventory for tests: these GPUs do not exist)" : "");
  return code;
}

int cmd_shutdown(const Context& ctx) {
  auto reply = call_daemon(ctx, "POST", "/v1/shutdown");
  if (!reply) return report_daemon_error(ctx, reply.error());
  if (reply->status != 200) return print_error(daemon_error(*reply), kExitError);
  if (!ctx.json) std::printf("yonderd is shutting down.\n");
  else print_json({{"ok", true}});
  return kExitOk;
}

namespace {

// What the running daemon uses (null when none answers), and the file alone.
struct ConfigViews {
  nlohmann::json running;
  config::Config file;
};
Result<ConfigViews> config_views(const Context& ctx) {
  ConfigViews v;
  auto file = config::Config::load(ctx.paths.config_file);
  if (!file) return std::move(file).error();
  v.file = std::move(*file);
  auto reply = call_daemon(ctx, "GET", "/v1/config");
  if (reply && reply->status == 200) v.running = nlohmann::json::parse(reply->body, nullptr, false);
  return v;
}

const char* kRestartHint = "restart yonderd to apply it (yonder shutdown, then yonderd)";

}  // namespace

int cmd_config_get(const Context& ctx, const std::string& key) {
  if (config::find_setting(key) == nullptr) {
    return print_error(config::unknown_setting(key), kExitUsage);
  }
  auto views = config_views(ctx);
  if (!views) return print_error(views.error(), kExitError);
  SettingLine line;
  for (auto& l : setting_lines(ctx.cfg, views->file, views->running)) {
    if (l.key == key) line = l;
  }
  if (ctx.json) {
    nlohmann::json j = {{"key", key}, {"value", line.value}, {"source", line.source},
                        {"running", !views->running.is_null()}};
    if (line.on_restart) j["on_restart"] = *line.on_restart;
    print_json(j);
  } else {
    std::printf("%s\n", line.value.c_str());
    if (line.on_restart) {
      std::fprintf(stderr, "yonder: note: yonderd runs with %s = %s; the file now says %s: %s\n", key.c_str(),
                   line.value.c_str(), line.on_restart->c_str(), kRestartHint);
    }
  }
  return kExitOk;
}

namespace {

// Root editing another user's node (the .deb's service runs as the user
// yonder) leaves the file with that node's owner, not root: the daemon
// must still read it.
Status keep_node_owner(const Context& ctx) {
  if (::geteuid() != 0) return ok_status();
  struct stat home {};
  if (::stat(ctx.paths.home.c_str(), &home) != 0 || home.st_uid == 0) return ok_status();
  if (::chown(ctx.paths.config_file.c_str(), home.st_uid, home.st_gid) != 0) {
    return make_error(ErrorCode::kPermissionDenied, "cannot give " + ctx.paths.config_file +
                                                        " back to the node's user: " + std::strerror(errno) +
                                                        "; run: chown --reference=" + ctx.paths.home + " " +
                                                        ctx.paths.config_file);
  }
  return ok_status();
}

// After the file changed: asks a running yonderd to take it
// (POST /v1/config/reload) and says what `key` does now: applied at once,
// waiting for a restart, or read at the next start (no daemon answered).
void report_reload(const Context& ctx, const std::string& key, const std::string& value) {
  auto reply = call_daemon(ctx, "POST", "/v1/config/reload");
  if (reply && reply->status != 200) {  // it runs, but could not take the file (its environment is invalid, ...)
    auto e = nlohmann::json::parse(reply->body, nullptr, false);
    std::string why = e.is_object() && e.contains("error") && e["error"].is_object() ? e["error"].value("message", "")
                                                                                     : reply->body.substr(0, 200);
    std::fprintf(stderr, "yonder: the running yonderd did not take the file: %s; %s\n", why.c_str(), kRestartHint);
  }
  nlohmann::json body = reply && reply->status == 200 ? nlohmann::json::parse(reply->body, nullptr, false) : nullptr;
  auto listed = [&](const char* list) {
    if (!body.is_object() || !body.contains(list) || !body[list].is_array()) return false;
    for (const auto& e : body[list]) {
      if (e.is_object() && e.value("key", "") == key) return true;
    }
    return false;
  };
  std::string shown = value.empty() ? "(default)" : value;
  if (ctx.json) {
    std::string state = !reply             ? "next_start"
                        : body.is_null()     ? "restart"
                        : listed("applied")  ? "applied"
                        : listed("restart")  ? "restart"
                                             : "unchanged";
    print_json({{"key", key}, {"value", value}, {"config_file", ctx.paths.config_file}, {"running", state}});
  } else if (!reply) {
    std::printf("%s = %s  (in %s; yonderd reads it when it starts)\n", key.c_str(), shown.c_str(),
                ctx.paths.config_file.c_str());
  } else if (body.is_null()) {
    std::printf("%s = %s  (in %s; %s)\n", key.c_str(), shown.c_str(), ctx.paths.config_file.c_str(), kRestartHint);
  } else if (listed("applied")) {
    std::printf("%s = %s  (in %s; the running yonderd applied it now)\n", key.c_str(), shown.c_str(),
                ctx.paths.config_file.c_str());
  } else if (listed("restart")) {
    std::printf("%s = %s  (in %s; %s)\n", key.c_str(), shown.c_str(), ctx.paths.config_file.c_str(), kRestartHint);
  } else {
    std::printf("%s = %s  (in %s; the running yonderd already uses it)\n", key.c_str(), shown.c_str(),
                ctx.paths.config_file.c_str());
  }
}

}  // namespace

int cmd_config_set(Context& ctx, const std::string& key, const std::string& value) {
  // Re-read the file alone: environment overrides must not be written back.
  auto file_cfg = config::Config::load(ctx.paths.config_file);
  if (!file_cfg) return print_error(file_cfg.error(), kExitError);
  if (auto st = file_cfg->set(key, value); !st) return print_error(st.error(), kExitUsage);
  if (auto st = file_cfg->save(ctx.paths.config_file); !st) return print_error(st.error(), kExitError);
  if (auto st = keep_node_owner(ctx); !st) return print_error(st.error(), kExitError);
  const auto* spec = config::find_setting(key);
  report_reload(ctx, key, file_cfg->get(key));
  if (!ctx.json) {
    if (!spec->env.empty() && ctx.env(std::string(spec->env).c_str())) {
      std::printf("note: %s is set in the environment and overrides this value\n", std::string(spec->env).c_str());
    }
  }
  return kExitOk;
}

int cmd_config_unset(Context& ctx, const std::string& key) {
  auto file_cfg = config::Config::load(ctx.paths.config_file);
  if (!file_cfg) return print_error(file_cfg.error(), kExitError);
  if (auto st = file_cfg->unset(key); !st) return print_error(st.error(), kExitUsage);
  if (auto st = file_cfg->save(ctx.paths.config_file); !st) return print_error(st.error(), kExitError);
  if (auto st = keep_node_owner(ctx); !st) return print_error(st.error(), kExitError);
  report_reload(ctx, key, file_cfg->get(key));
  return kExitOk;
}

int cmd_config_show(const Context& ctx) {
  auto views = config_views(ctx);
  if (!views) return print_error(views.error(), kExitError);
  auto lines = setting_lines(ctx.cfg, views->file, views->running);
  bool running = !views->running.is_null();
  if (ctx.json) {
    nlohmann::json all = nlohmann::json::array();
    size_t i = 0;
    for (const auto& s : config::all_settings()) {
      const auto& l = lines[i++];
      nlohmann::json j = {{"key", s.key}, {"value", l.value}, {"source", l.source},
                          {"default", s.default_doc}, {"env", s.env}, {"doc", s.doc}};
      if (l.on_restart) j["on_restart"] = *l.on_restart;
      all.push_back(j);
    }
    print_json({{"config_file", ctx.paths.config_file}, {"home", ctx.paths.home}, {"running", running}, {"settings", all}});
    return kExitOk;
  }
  std::printf("# config file: %s\n# state:       %s\n# %s\n\n", ctx.paths.config_file.c_str(), ctx.paths.home.c_str(),
              running ? "values: what the running yonderd uses, and where each came from"
                      : "yonderd is not running: values it would start with (this file and this shell's environment)");
  size_t pending = 0, i = 0;
  for (const auto& s : config::all_settings()) {
    const auto& l = lines[i++];
    std::printf("%-22s = %-24s # %s", l.key.c_str(),
                l.value.empty() ? ("(" + std::string(s.default_doc) + ")").c_str() : l.value.c_str(), l.source.c_str());
    if (!s.env.empty()) std::printf(", env %s", std::string(s.env).c_str());
    if (l.on_restart) {
      std::printf("; the file now says %s", l.on_restart->empty() ? "(default)" : l.on_restart->c_str());
      ++pending;
    }
    std::printf("\n%-22s   %s\n", "", std::string(s.doc).c_str());
  }
  if (pending > 0) std::printf("\n# %zu setting(s) in the file differ from what runs: %s\n", pending, kRestartHint);
  return kExitOk;
}

int cmd_config_docs() {
  std::printf("%s", config::settings_markdown().c_str());
  return kExitOk;
}

}  // namespace yonder::cli
