// The node's API token ($YONDER_HOME/api-token), for tests that call a
// yonderd's local API directly: every request must send it (api/auth.h).
#pragma once

#include <fstream>
#include <string>

namespace yonder::testing {

inline std::string api_token(const std::string& home) {
  std::ifstream in(home + "/api-token");
  std::string token;
  std::getline(in, token);
  return token;
}

}  // namespace yonder::testing
