#pragma once

namespace yonder::node {
inline constexpr const char* kVersion = "0.1.0";
}
