#include "release/app_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "release/cli_doc.h"
#include "release/version.h"

namespace yonder::release {

void add_release_flags(CLI::App& app, const std::string& program, ManPageInfo man) {
  app.set_version_flag("--version", version_line(program));
  man.version = version_line(program);
  // Flag callbacks run before required options are checked, so
  // `yonder-relay --help-man` works without --key-file, like --help.
  app.add_flag_callback(
         "--help-man",
         [&app, program, man] {
           std::string page = man_page(describe(app, program), man);
           std::fwrite(page.data(), 1, page.size(), stdout);
           throw CLI::Success();
         },
         "Print the man page (roff)")
      ->group("");
}

}  // namespace yonder::release
