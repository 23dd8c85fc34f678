// yonderd: the node daemon. Parses arguments and runs src/node.
#include <CLI/CLI.hpp>

#include "node/daemon.h"
#include "release/app_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"yonderd: the Yonder node daemon (identity, peer links, jobs, local API).\n"
               "State folder: $YONDER_HOME (default ~/.local/share/yonder); settings: docs/config.md."};
  yonder::node::DaemonOptions options;
  std::string log_format;
  app.add_option("--ready-fd", options.ready_fd,
                 "Write \"ready\\n\" to this file descriptor once the API accepts connections");
  app.add_option("--log-format", log_format, "auto, text or json (overrides log.format)")
      ->check(CLI::IsMember({"auto", "text", "json"}));
  yonder::release::ManPageInfo man;
  man.section = 8;
  man.summary = "the Yonder node daemon";
  man.extra = {
      {"Files", "$YONDER_HOME (default ~/.local/share/yonder): identity.key (created by `yonder init`), state.db, "
                "config.toml, the API socket yonderd.sock and the API token api-token.\n\nThe Debian package runs "
                "yonderd as the system user yonder with YONDER_HOME=/var/lib/yonder (yonderd.service), with the "
                "socket and the token readable by the group yonder: root and that group's members control it."},
      {"Environment", "YONDER_HOME, YONDER_CONFIG, YONDER_PASSPHRASE or YONDER_PASSPHRASE_FILE (an encrypted key), "
                      "and one variable per setting (`yonder config show`, docs/config.md)."},
      {"Signals", "SIGTERM and SIGINT stop the daemon cleanly; running jobs' containers keep running and are "
                  "picked up again at the next start."}};
  man.see_also = {"yonder(1)", "yonder-relay(8)"};
  yonder::release::add_release_flags(app, "yonderd", man);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (!log_format.empty()) options.log_format = log_format;
  return yonder::node::run_daemon(options);
}
