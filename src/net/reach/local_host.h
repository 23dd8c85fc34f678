// This host as the paths see it: whether the link listens where a LAN or a
// router could reach it, and the host's own IPv4 addresses (advertised in
// share links; never dialled on a peer's word).
#pragma once

#include <string>
#include <vector>

namespace yonder::reach {

// What the link listens on: nothing, loopback only, or more.
enum class Listening { kNo, kLoopbackOnly, kYes };

// `listen` as in link.listen ("HOST:PORT"; empty: not listening).
Listening listening_of(const std::string& listen);

// This host's IPv4 interface addresses (getifaddrs), loopback included;
// empty when they cannot be listed.
std::vector<std::string> local_ipv4_hosts();

}  // namespace yonder::reach
