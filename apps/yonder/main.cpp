// yonder: the command-line interface. Parses arguments and calls src/cli.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/doctor.h"
#include "cli/exit_codes.h"
#include "node/version.h"

int main(int argc, char** argv) {
  using namespace yonder::cli;
  CLI::App app{"yonder: share NVIDIA GPUs with people you trust, peer to peer.\n"
               "State folder: $YONDER_HOME (default ~/.local/share/yonder). Exit codes: docs/cli.md."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("yonder ") + yonder::node::kVersion);
  bool json = false;

  InitArgs init_args;
  std::string name;
  auto* init = app.add_subcommand("init", "Create this node's identity (never replaces an existing one)");
  init->add_option("--name", name, "Name shown to peers (default: the host name)");
  init->add_flag("--passphrase", init_args.passphrase,
                 "Encrypt the key at rest (asks, or reads YONDER_PASSPHRASE); yonderd then needs it to start");
  init->add_flag("--json", json, "Machine-readable output");

  auto* status = app.add_subcommand("status", "Node id, name, daemon version and uptime, backends, peers");
  status->add_flag("--json", json, "Machine-readable output");
  auto* gpu = app.add_subcommand("gpu", "GPUs this node can offer (exit 10-14 when there are none; docs/cli.md)");
  gpu->add_flag("--json", json, "Machine-readable output");
  auto* doctor = app.add_subcommand("doctor", "Check Docker, the NVIDIA runtime and driver, runsc, the daemon, the key");
  doctor->add_flag("--json", json, "Machine-readable output");
  auto* shutdown = app.add_subcommand("shutdown", "Stop the running yonderd");

  auto* cfg = app.add_subcommand("config", "Read and change settings (docs/config.md)");
  cfg->require_subcommand(1);
  std::string key, value;
  auto* cfg_get = cfg->add_subcommand("get", "Print a setting's effective value");
  cfg_get->add_option("key", key, "Setting, e.g. log.level")->required();
  cfg_get->add_flag("--json", json, "Machine-readable output");
  auto* cfg_set = cfg->add_subcommand("set", "Write a setting to the config file");
  cfg_set->add_option("key", key, "Setting, e.g. log.level")->required();
  cfg_set->add_option("value", value, "New value")->required();
  auto* cfg_unset = cfg->add_subcommand("unset", "Remove a setting from the config file (back to its default)");
  cfg_unset->add_option("key", key, "Setting")->required();
  auto* cfg_show = cfg->add_subcommand("show", "Every setting with its value, source and meaning");
  cfg_show->add_flag("--json", json, "Machine-readable output");
  auto* cfg_docs = cfg->add_subcommand("docs", "Print the settings reference as Markdown");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  if (*cfg_docs) return cmd_config_docs();
  auto ctx = make_context();
  if (!ctx) return print_error(ctx.error(), kExitError);
  ctx->json = json;
  if (*init) {
    if (!name.empty()) init_args.name = name;
    return cmd_init(*ctx, init_args);
  }
  if (*status) return cmd_status(*ctx);
  if (*gpu) return cmd_gpu(*ctx);
  if (*doctor) return cmd_doctor(*ctx);
  if (*shutdown) return cmd_shutdown(*ctx);
  if (*cfg_get) return cmd_config_get(*ctx, key);
  if (*cfg_set) return cmd_config_set(*ctx, key, value);
  if (*cfg_unset) return cmd_config_unset(*ctx, key);
  if (*cfg_show) return cmd_config_show(*ctx);
  return kExitUsage;
}
