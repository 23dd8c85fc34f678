// Shell completion scripts generated from a CommandDoc (cli_doc.h): bash,
// zsh and fish. Each completes subcommands at every level, the options of
// the command typed so far, and files after an option that takes a value
// and for positional arguments. Installed by the .deb (cmake/Packaging.cmake)
// and printed by `yonder completion SHELL`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "release/cli_doc.h"

namespace yonder::release {

enum class Shell { kBash, kZsh, kFish };

// "bash", "zsh" or "fish"; nullopt for anything else.
std::optional<Shell> parse_shell(std::string_view name);

std::string completion_script(const CommandDoc& root, Shell shell);

}  // namespace yonder::release
