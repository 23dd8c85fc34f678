#include "os/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace yonder::os {

std::string Ipv4Interface::address_text() const {
  in_addr a{htonl(address)};
  char buf[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, &a, buf, sizeof buf) != nullptr ? std::string(buf) : std::string();
}

Result<std::vector<Ipv4Interface>> ipv4_interfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return make_error(ErrorCode::kUnavailable, std::string("cannot list network interfaces: ") + std::strerror(errno));
  }
  std::vector<Ipv4Interface> out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    out.push_back({i->ifa_name != nullptr ? i->ifa_name : "", ntohl(sin->sin_addr.s_addr), i->ifa_flags});
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace yonder::os
