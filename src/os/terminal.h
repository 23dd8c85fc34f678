// Terminal helpers.
#pragma once

#include <string>

#include "base/error.h"

namespace yonder::os {

// Prompts on /dev/tty and reads a line with echo off. kUnavailable when there
// is no terminal (unattended use must pass secrets another way).
Result<std::string> read_secret(const std::string& prompt);

bool stdout_is_terminal();
bool stderr_is_terminal();

}  // namespace yonder::os
