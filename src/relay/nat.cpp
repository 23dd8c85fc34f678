#include "relay/nat.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace yonder::relay {

std::string NetAddress::to_string() const {
  if (ip.find(':') != std::string::npos) return "[" + ip + "]:" + std::to_string(port);
  return ip + ":" + std::to_string(port);
}

std::optional<std::string> canonical_ip(std::string_view ip) {
  if (ip.empty() || ip.size() > 45) return std::nullopt;
  std::string text(ip);
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    ::inet_ntop(AF_INET, &v4, out, sizeof out);
    return std::string(out);
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return std::nullopt;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    std::memcpy(&v4, v6.s6_addr + 12, 4);
    ::inet_ntop(AF_INET, &v4, out, sizeof out);
    return std::string(out);
  }
  ::inet_ntop(AF_INET6, &v6, out, sizeof out);
  return std::string(out);
}

Result<NetAddress> parse_net_address(std::string_view text) {
  auto bad = [&] {
    return make_error(ErrorCode::kInvalidArgument, "bad address \"" + std::string(text.substr(0, kMaxAddressText)) +
                                                       "\" (expected IP:PORT or [IPv6]:PORT)");
  };
  if (text.empty() || text.size() > kMaxAddressText) return bad();
  std::string_view host, port;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return bad();
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad();
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad();  // bare IPv6 needs brackets
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) return bad();
  auto ip = canonical_ip(host);
  if (!ip) return bad();
  return NetAddress{*ip, static_cast<uint16_t>(value)};
}

Mapping classify_mapping(const NetAddress& observed, const std::optional<NetAddress>& local) {
  if (!local) return Mapping::kUnknown;
  if (observed == *local) return Mapping::kNone;
  if (observed.ip != local->ip && observed.port == local->port) return Mapping::kPortPreserving;
  return Mapping::kPortChanging;
}

NatVerdict combine_mappings(const std::vector<Mapping>& samples) {
  bool any_none = false, any_preserving = false;
  for (Mapping m : samples) {
    if (m == Mapping::kPortChanging) return NatVerdict::kSymmetric;
    any_none |= m == Mapping::kNone;
    any_preserving |= m == Mapping::kPortPreserving;
  }
  if (any_preserving) return NatVerdict::kPortPreserving;
  if (any_none) return NatVerdict::kNone;
  return NatVerdict::kUnknown;
}

const char* mapping_name(Mapping m) {
  switch (m) {
    case Mapping::kUnknown: return "unknown";
    case Mapping::kNone: return "none";
    case Mapping::kPortPreserving: return "port_preserving";
    case Mapping::kPortChanging: return "port_changing";
  }
  return "unknown";
}

const char* verdict_name(NatVerdict v) {
  switch (v) {
    case NatVerdict::kUnknown: return "unknown";
    case NatVerdict::kNone: return "none";
    case NatVerdict::kPortPreserving: return "port_preserving";
    case NatVerdict::kSymmetric: return "symmetric";
  }
  return "unknown";
}

std::optional<Mapping> parse_mapping(std::string_view name) {
  for (Mapping m : {Mapping::kUnknown, Mapping::kNone, Mapping::kPortPreserving, Mapping::kPortChanging}) {
    if (name == mapping_name(m)) return m;
  }
  return std::nullopt;
}

std::optional<NatVerdict> parse_verdict(std::string_view name) {
  for (NatVerdict v : {NatVerdict::kUnknown, NatVerdict::kNone, NatVerdict::kPortPreserving, NatVerdict::kSymmetric}) {
    if (name == verdict_name(v)) return v;
  }
  return std::nullopt;
}

}  // namespace yonder::relay
