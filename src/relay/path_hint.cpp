#include "relay/path_hint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "relay/protocol.h"

namespace yonder::relay {
namespace {

// "a.b.c.d:port", port 1-65535: a public IPv4 endpoint as a router maps it.
bool valid_endpoint(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || text.size() > 21) return false;
  std::string host = text.substr(0, colon);
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  unsigned port = 0;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, port);
  return ec == std::errc() && end == last && first != last && port >= 1 && port <= 65535;
}

// The address as a host-order integer, or nullopt.
std::optional<uint32_t> ipv4(const std::string& host) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

bool in(uint32_t a, uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); }

std::string host_of(const std::string& endpoint) { return endpoint.substr(0, endpoint.rfind(':')); }

}  // namespace

namespace {

// Why a peer may never make us dial `a` (nullptr: it may, as far as these
// rules go): loopback, unspecified, link-local, multicast and the like, or
// one of this host's own addresses.
const char* never_dialled(uint32_t a, const std::vector<std::string>& own_hosts) {
  if (in(a, 0x7f000000, 8)) return "a loopback address";
  if (in(a, 0x00000000, 8)) return "an unspecified address";
  if (in(a, 0xa9fe0000, 16)) return "a link-local address";
  if (in(a, 0xe0000000, 3)) return "a multicast, reserved or broadcast address";
  for (const auto& own : own_hosts) {
    if (ipv4(own) == a) return "one of this host's own addresses";
  }
  return nullptr;
}

// RFC 1918 private and RFC 6598 shared (carrier-grade NAT) addresses.
bool is_local(uint32_t a) {
  return in(a, 0x0a000000, 8) || in(a, 0xac100000, 12) || in(a, 0xc0a80000, 16) || in(a, 0x64400000, 10);
}

}  // namespace

Status check_hint_target(const std::string& endpoint, const HintDialContext& ctx) {
  std::string host = host_of(endpoint);
  auto a = ipv4(host);
  auto refuse = [&](const std::string& why) {
    return make_error(ErrorCode::kPermissionDenied, "path hint to " + endpoint + " refused: " + why);
  };
  if (!a) return refuse("not an IPv4 address");
  if (const char* why = never_dialled(*a, ctx.own_hosts)) return refuse(why);
  auto among = [&](const std::vector<std::string>& hosts) {
    return std::any_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return ipv4(h) == a; });
  };
  bool local = is_local(*a);
  if (local && !among(ctx.peer_hosts)) return refuse("a private address the peer's share link did not advertise");
  if (!local && !among(ctx.peer_hosts) && !among(ctx.observed_hosts)) {
    return refuse("a public address the peer's share link did not advertise and the relay did not see it connect from");
  }
  return ok_status();
}

Status check_dial_back_target(const std::string& endpoint, const std::vector<std::string>& own_hosts) {
  auto refuse = [&](const std::string& why) {
    return make_error(ErrorCode::kPermissionDenied, "dial-back to " + endpoint.substr(0, 64) + " refused: " + why);
  };
  if (!valid_endpoint(endpoint)) return refuse("not an IPv4 address with a port");
  auto a = ipv4(host_of(endpoint));
  if (const char* why = never_dialled(*a, own_hosts)) return refuse(why);
  if (is_local(*a)) return refuse("a private or shared address: dial-back tests reachability from the internet");
  return ok_status();
}

bool is_public_ipv4_endpoint(const std::string& endpoint) {
  if (!valid_endpoint(endpoint)) return false;
  auto a = ipv4(host_of(endpoint));
  return never_dialled(*a, {}) == nullptr && !is_local(*a);
}

Bytes encode_path_hint(const PathHint& hint) {
  nlohmann::json j = {{"v", 1}};
  if (hint.mapped) j["mapped"] = *hint.mapped;
  std::string s = j.dump();
  return Bytes(s.begin(), s.end());
}

Result<PathHint> decode_path_hint(ByteView bytes) {
  if (bytes.size() > kMaxSignalBytes) return make_error(ErrorCode::kInvalidArgument, "path hint too large");
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "path hint is not a JSON object");
  auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != 1) {
    return make_error(ErrorCode::kInvalidArgument, "path hint of an unknown version");
  }
  PathHint hint;
  if (auto m = j.find("mapped"); m != j.end()) {
    if (!m->is_string() || !valid_endpoint(m->get_ref<const std::string&>())) {
      return make_error(ErrorCode::kInvalidArgument, "path hint: \"mapped\" must be IPv4:PORT");
    }
    hint.mapped = m->get<std::string>();
  }
  return hint;
}

}  // namespace yonder::relay
