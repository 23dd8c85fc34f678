// The release flags every program has: --version (with the git revision)
// and the hidden --help-man, which prints the program's man page generated
// from its CLI11 definition (the build runs it to make share/man pages).
#pragma once

#include <string>

#include "release/man_page.h"

namespace CLI {
class App;
}

namespace yonder::release {

// Call after every option and subcommand is added (the page reads the App
// when the flag is parsed, so later additions still show).
void add_release_flags(CLI::App& app, const std::string& program, ManPageInfo man);

}  // namespace yonder::release
