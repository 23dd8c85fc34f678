// Addresses as the relay sees them, and what they say about the node's NAT.
//
// A node tells the relay the local address of the socket it connected from
// ("local_addr"); the relay compares it with the address the connection
// arrived from (the "observed" address, the node's public address if a NAT
// is in the way). Per connection (`Mapping`):
//   none             observed == local: no translation, the node is reachable
//                    at that address if its firewall lets connections in;
//   port_preserving  the address changed but the port did not: a NAT that
//                    keeps source ports (Linux MASQUERADE when the port is
//                    free), the case where hole punching with the TTL trick
//                    of ../../docs/architecture.md works;
//   port_changing    the NAT picked another port (MASQUERADE --random-fully,
//                    or a port collision);
//   unknown          the node did not say its local address.
// Per node (`NatVerdict`), over every live registration of its key: a node
// that registers a second time from another local socket (RelayClient's
// probe_nat) gives the relay two samples. Any port_changing sample makes it
// "symmetric" (assume a new port per destination: use the relay); otherwise
// any port_preserving sample makes it "port_preserving"; all none is "none".
// Telling endpoint-independent from endpoint-dependent mapping for real
// needs a second relay address and belongs to the hole-punching work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace yonder::relay {

struct NetAddress {
  std::string ip;  // canonical text form (inet_ntop), never a name
  uint16_t port = 0;
  bool operator==(const NetAddress&) const = default;
  // "1.2.3.4:5" or "[2001:db8::1]:5".
  std::string to_string() const;
};

// At most this long on the wire ("[" + 45-char IPv6 + "]:65535").
constexpr size_t kMaxAddressText = 64;

// Parses "1.2.3.4:5" or "[v6]:5" (numeric addresses only; IPv4-mapped IPv6
// addresses become IPv4). Untrusted input: bounded, never throws.
Result<NetAddress> parse_net_address(std::string_view text);
// The canonical form of an IP address text (IPv4-mapped IPv6 -> IPv4).
std::optional<std::string> canonical_ip(std::string_view ip);

enum class Mapping { kUnknown, kNone, kPortPreserving, kPortChanging };
enum class NatVerdict { kUnknown, kNone, kPortPreserving, kSymmetric };

Mapping classify_mapping(const NetAddress& observed, const std::optional<NetAddress>& local);
NatVerdict combine_mappings(const std::vector<Mapping>& samples);

const char* mapping_name(Mapping m);
const char* verdict_name(NatVerdict v);
std::optional<Mapping> parse_mapping(std::string_view name);
std::optional<NatVerdict> parse_verdict(std::string_view name);

}  // namespace yonder::relay
