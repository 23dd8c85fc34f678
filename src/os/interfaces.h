// This host's IPv4 interface addresses, for the three places that need
// them: the addresses a share link advertises and a path hint may not name
// (net/reach/peer_link), the host candidates of hole punching (net/reach/punch_paths)
// and the interfaces LAN discovery announces on (discovery/lan_discovery).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace yonder::os {

struct Ipv4Interface {
  std::string name;       // "eth0"
  uint32_t address = 0;   // host byte order
  unsigned flags = 0;     // IFF_UP, IFF_LOOPBACK, IFF_MULTICAST, ...

  std::string address_text() const;  // "192.0.2.7"
};

// Every IPv4 address of every interface (getifaddrs), loopback included,
// in the kernel's order; an interface with several addresses appears once
// per address. kUnavailable when the interfaces cannot be listed.
Result<std::vector<Ipv4Interface>> ipv4_interfaces();

}  // namespace yonder::os
