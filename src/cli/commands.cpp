#include "cli/commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

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

int cmd_config_get(const Context& ctx, const std::string& key) {
  if (config::find_setting(key) == nullptr) {
    return print_error(config::unknown_setting(key), kExitUsage);
  }
  if (ctx.json) {
    print_json({{"key", key}, {"value", ctx.cfg.get(key)}, {"source", config::source_name(ctx.cfg.source(key))}});
  } else {
    std::printf("%s\n", ctx.cfg.get(key).c_str());
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

}  // namespace

int cmd_config_set(Context& ctx, const std::string& key, const std::string& value) {
  // Re-read the file alone: environment overrides must not be written back.
  auto file_cfg = config::Config::load(ctx.paths.config_file);
  if (!file_cfg) return print_error(file_cfg.error(), kExitError);
  if (auto st = file_cfg->set(key, value); !st) return print_error(st.error(), kExitUsage);
  if (auto st = file_cfg->save(ctx.paths.config_file); !st) return print_error(st.error(), kExitError);
  if (auto st = keep_node_owner(ctx); !st) return print_error(st.error(), kExitError);
  const auto* spec = config::find_setting(key);
  if (!ctx.json) {
    std::printf("%s = %s  (in %s; restart yonderd to apply)\n", key.c_str(), file_cfg->get(key).c_str(),
                ctx.paths.config_file.c_str());
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
  return kExitOk;
}

int cmd_config_show(const Context& ctx) {
  if (ctx.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& s : config::all_settings()) {
      all.push_back({{"key", s.key}, {"value", ctx.cfg.get(s.key)}, {"source", config::source_name(ctx.cfg.source(s.key))},
                     {"default", s.default_doc}, {"env", s.env}, {"doc", s.doc}});
    }
    print_json({{"config_file", ctx.paths.config_file}, {"home", ctx.paths.home}, {"settings", all}});
    return kExitOk;
  }
  std::printf("# config file: %s\n# state:       %s\n\n", ctx.paths.config_file.c_str(), ctx.paths.home.c_str());
  for (const auto& s : config::all_settings()) {
    std::string value = ctx.cfg.get(s.key);
    std::printf("%-22s = %-24s # %s", std::string(s.key).c_str(),
                value.empty() ? ("(" + std::string(s.default_doc) + ")").c_str() : value.c_str(),
                config::source_name(ctx.cfg.source(s.key)));
    if (!s.env.empty()) std::printf(", env %s", std::string(s.env).c_str());
    std::printf("\n%-22s   %s\n", "", std::string(s.doc).c_str());
  }
  return kExitOk;
}

int cmd_config_docs() {
  std::printf("%s", config::settings_markdown().c_str());
  return kExitOk;
}

}  // namespace yonder::cli
