// The version every program prints: the project version and the git
// revision of the source it was built from (`git describe --always --dirty`
// at build time; "unknown" outside a git checkout).
#pragma once

#include <string>
#include <string_view>

namespace yonder::release {

std::string_view project_version();  // "0.1.0"
std::string_view git_revision();     // "a7dec06-dirty", or "unknown"

// "yonder 0.1.0 (git a7dec06-dirty)"
std::string version_line(std::string_view program);

}  // namespace yonder::release
