// Port mapping on the home router: asks the gateway of the local network to
// forward a TCP port on its public address to this host, with NAT-PMP
// (RFC 6886, libnatpmp) or UPnP-IGD (WANIPConnection AddPortMapping,
// miniupnpc). One of the paths of "The peer link" (../shared/ARCHITECTURE.md):
// a peer behind a NAT that allows it becomes directly dialable.
//
// These calls block (a UDP exchange with the gateway, an SSDP search, HTTP
// to the IGD): run them off the event loop (PortMapper does). The router's
// replies are parsed by libnatpmp and miniupnpc, not here; what we take from
// them (addresses, ports) is validated before use.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"

namespace yonder::portmap {

inline constexpr const char* kNatPmpName = "nat-pmp";
inline constexpr const char* kUpnpIgdName = "upnp-igd";

// A port forwarded on the gateway.
struct Mapping {
  std::string protocol;     // kNatPmpName or kUpnpIgdName
  std::string external_ip;  // the gateway's public IPv4 address, dotted
  uint16_t external_port = 0;
  uint16_t internal_port = 0;
  std::chrono::seconds lifetime{0};  // lease granted; 0 = permanent (some IGDs only do that)
  // NAT-PMP: the gateway's address ("192.168.1.1"). UPnP-IGD: the IGD's
  // root description URL, so unmap/renew skip the SSDP search.
  std::string gateway;
  // UPnP-IGD only: the LAN address the mapping points to (the IGD needs it
  // again to renew). Empty for NAT-PMP.
  std::string internal_client;

  nlohmann::json to_json() const;
  // The inverse, strict about shape (used by tools and tests, not the network).
  static Result<Mapping> from_json(const nlohmann::json& j);
};

enum class Method { kAny, kNatPmp, kUpnpIgd };

struct MapOptions {
  Method method = Method::kAny;  // kAny: NAT-PMP first, then UPnP-IGD
  // External port to ask for; 0 means "the same as the internal port". A
  // gateway that has it taken gives another (NAT-PMP) or we try a few (UPnP).
  uint16_t external_port = 0;
  std::chrono::seconds lifetime{2 * 3600};
  // Bounds on each protocol's discovery, so "no gateway" is known quickly.
  std::chrono::milliseconds natpmp_timeout{1500};
  std::chrono::milliseconds upnp_discovery_timeout{2000};
  std::string description = "yonder";
};

// Asks the gateway to forward TCP `internal_port` to this host. Tries the
// methods in order and returns the first mapping granted; the error, if all
// fail, says what each answered and what the user can do.
Result<Mapping> map_tcp_port(uint16_t internal_port, const MapOptions& options);

// Renews `m` with the same ports (same request as mapping; gateways treat it
// as a refresh). Returns the mapping as now granted.
Result<Mapping> renew(const Mapping& m, const MapOptions& options);

// Removes the mapping from the gateway.
Status unmap(const Mapping& m, const MapOptions& options = {});

// What the local gateway offers, for `yonder netcheck`. Leaves nothing
// behind: NAT-PMP is asked for its public address only, UPnP-IGD for its
// external address only.
struct ProbeResult {
  struct Answer {
    bool available = false;
    std::string external_ip;  // when available
    std::string gateway;      // NAT-PMP: gateway address; UPnP: root description URL
    std::string error;        // when not: what happened
  };
  Answer natpmp;
  Answer upnp;

  bool any() const { return natpmp.available || upnp.available; }
  nlohmann::json to_json() const;
};

Result<ProbeResult> probe(const MapOptions& options = {});

// True for addresses that cannot be reached from the internet (RFC 1918,
// RFC 6598 shared/CGNAT, loopback, link-local): a gateway whose external
// address is one of these sits behind another NAT, and its mappings do not
// make us reachable from outside.
bool is_private_ipv4(const std::string& dotted);

// The message for "nothing answered", shared by map and the mapper.
std::string no_gateway_message(const std::string& natpmp_error, const std::string& upnp_error);

}  // namespace yonder::portmap
