// yonderd: the node daemon. Parses arguments and runs src/node.
#include <CLI/CLI.hpp>

#include "node/daemon.h"
#include "node/version.h"

int main(int argc, char** argv) {
  CLI::App app{"yonderd: the Yonder node daemon (identity, peer links, jobs, local API).\n"
               "State folder: $YONDER_HOME (default ~/.local/share/yonder); settings: docs/config.md."};
  app.set_version_flag("--version", std::string("yonderd ") + yonder::node::kVersion);
  yonder::node::DaemonOptions options;
  std::string log_format;
  app.add_option("--ready-fd", options.ready_fd,
                 "Write \"ready\\n\" to this file descriptor once the API accepts connections");
  app.add_option("--log-format", log_format, "auto, text or json (overrides log.format)")
      ->check(CLI::IsMember({"auto", "text", "json"}));
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
