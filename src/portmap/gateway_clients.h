// The two protocol clients behind port_mapping.h, one per library: NAT-PMP
// through libnatpmp (natpmp_client.cpp), UPnP-IGD through miniupnpc
// (upnp_client.cpp). Internal to src/portmap.
//
// Error codes carry meaning for the caller: kUnavailable means nothing
// answered (no such gateway here); any other code means a gateway answered
// and refused or misbehaved, which the user fixes on the router.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "portmap/port_mapping.h"

namespace yonder::portmap::detail {

// NAT-PMP to the default gateway (or `gateway`, dotted, when not empty).
Result<Mapping> natpmp_map(uint16_t internal_port, uint16_t external_port, std::chrono::seconds lifetime,
                           std::chrono::milliseconds timeout, const std::string& gateway = "");
Status natpmp_unmap(const Mapping& m, std::chrono::milliseconds timeout);
// The gateway's address and its public address (no mapping made).
struct NatPmpAddress {
  std::string gateway;
  std::string external_ip;
};
Result<NatPmpAddress> natpmp_public_address(std::chrono::milliseconds timeout);

// UPnP-IGD: an SSDP search (bounded by `discovery_timeout`) unless
// `root_desc_url` names the IGD already.
Result<Mapping> upnp_map(uint16_t internal_port, uint16_t external_port, std::chrono::seconds lifetime,
                         std::chrono::milliseconds discovery_timeout, const std::string& description,
                         const std::string& root_desc_url = "");
Status upnp_unmap(const Mapping& m);
struct UpnpAddress {
  std::string root_desc_url;
  std::string external_ip;
};
Result<UpnpAddress> upnp_external_address(std::chrono::milliseconds discovery_timeout);

// A dotted IPv4 address from text a gateway sent, or an error.
Result<std::string> checked_ipv4(const char* text, const char* what);

}  // namespace yonder::portmap::detail
