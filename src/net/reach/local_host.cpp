#include "net/reach/local_host.h"

#include "os/interfaces.h"

namespace yonder::reach {

Listening listening_of(const std::string& listen) {
  if (listen.empty()) return Listening::kNo;
  std::string host = listen.substr(0, listen.rfind(':'));
  bool loopback = host.rfind("127.", 0) == 0 || host == "[::1]" || host == "localhost";
  return loopback ? Listening::kLoopbackOnly : Listening::kYes;
}

std::vector<std::string> local_ipv4_hosts() {
  std::vector<std::string> out;
  if (auto ifs = os::ipv4_interfaces()) {
    for (const auto& i : *ifs) out.push_back(i.address_text());
  }
  return out;
}

}  // namespace yonder::reach
