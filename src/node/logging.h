// Daemon logging with spdlog: human text on a terminal, JSON lines otherwise
// (or as configured). Secrets are never passed to the logger.
#pragma once

#include <string>

namespace yonder::node {

// format: "auto", "text" or "json"; level: spdlog level name.
void setup_logging(const std::string& format, const std::string& level);

}  // namespace yonder::node
