#include "portmap/port_mapping.h"

#include <arpa/inet.h>

#include "portmap/gateway_clients.h"

namespace yonder::portmap {
namespace {

bool allows(Method m, Method which) {
  return m == Method::kAny || m == which;
}

// The error after every method failed: "nothing answered" gets the advice
// to enable mappings or use a relay; a refusal keeps its own advice.
Error combined_error(const std::optional<Error>& natpmp, const std::optional<Error>& upnp) {
  bool silent =
      (!natpmp || natpmp->code() == ErrorCode::kUnavailable) && (!upnp || upnp->code() == ErrorCode::kUnavailable);
  std::string n = natpmp ? natpmp->message() : "not tried";
  std::string u = upnp ? upnp->message() : "not tried";
  if (silent) return make_error(ErrorCode::kUnavailable, no_gateway_message(n, u));
  // A gateway answered: its refusal is the error to show first.
  bool natpmp_refused = natpmp && natpmp->code() != ErrorCode::kUnavailable;
  const Error& first = natpmp_refused ? *natpmp : *upnp;
  std::string other = natpmp_refused ? u : n;
  return make_error(first.code(), first.message() + " (other method: " + other + ")");
}

}  // namespace

std::string no_gateway_message(const std::string& natpmp_error, const std::string& upnp_error) {
  return "no UPnP-IGD or NAT-PMP gateway answered on the local network (" + natpmp_error + "; " + upnp_error +
         "); enable UPnP or NAT-PMP on the router, or rely on a relay";
}

nlohmann::json Mapping::to_json() const {
  nlohmann::json j = {{"protocol", protocol},           {"external_ip", external_ip},
                      {"external_port", external_port}, {"internal_port", internal_port},
                      {"lifetime_s", lifetime.count()}, {"gateway", gateway}};
  if (!internal_client.empty()) j["internal_client"] = internal_client;
  return j;
}

Result<Mapping> Mapping::from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument, "not a port mapping: " + what);
  };
  if (!j.is_object()) return bad("expected a JSON object");
  auto str = [&](const char* k) -> const nlohmann::json* {
    auto it = j.find(k);
    return (it != j.end() && it->is_string()) ? &*it : nullptr;
  };
  auto port = [&](const char* k) -> std::optional<uint16_t> {
    auto it = j.find(k);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 65535) {
      return std::nullopt;
    }
    return static_cast<uint16_t>(it->get<int64_t>());
  };
  Mapping m;
  auto* proto = str("protocol");
  if (!proto || (*proto != kNatPmpName && *proto != kUpnpIgdName)) return bad("protocol must be nat-pmp or upnp-igd");
  m.protocol = proto->get<std::string>();
  auto* ip = str("external_ip");
  if (!ip) return bad("external_ip missing");
  m.external_ip = ip->get<std::string>();
  auto ext = port("external_port"), in = port("internal_port");
  if (!ext || !in) return bad("ports must be 1-65535");
  m.external_port = *ext;
  m.internal_port = *in;
  auto lt = j.find("lifetime_s");
  if (lt == j.end() || !lt->is_number_integer() || lt->get<int64_t>() < 0 || lt->get<int64_t>() > UINT32_MAX) {
    return bad("lifetime_s must be a number of seconds");
  }
  m.lifetime = std::chrono::seconds(lt->get<int64_t>());
  auto* gw = str("gateway");
  if (!gw || gw->get<std::string>().empty()) return bad("gateway missing");
  m.gateway = gw->get<std::string>();
  if (auto* c = str("internal_client")) m.internal_client = c->get<std::string>();
  return m;
}

Result<Mapping> map_tcp_port(uint16_t internal_port, const MapOptions& options) {
  if (internal_port == 0) return make_error(ErrorCode::kInvalidArgument, "cannot map port 0: bind the listener first");
  uint16_t wanted = options.external_port != 0 ? options.external_port : internal_port;
  std::optional<Error> natpmp_err, upnp_err;
  if (allows(options.method, Method::kNatPmp)) {
    auto m = detail::natpmp_map(internal_port, wanted, options.lifetime, options.natpmp_timeout);
    if (m.ok()) return m;
    natpmp_err = std::move(m).error();
  }
  if (allows(options.method, Method::kUpnpIgd)) {
    auto m =
        detail::upnp_map(internal_port, wanted, options.lifetime, options.upnp_discovery_timeout, options.description);
    if (m.ok()) return m;
    upnp_err = std::move(m).error();
  }
  return combined_error(natpmp_err, upnp_err);
}

Result<Mapping> renew(const Mapping& m, const MapOptions& options) {
  if (m.protocol == kNatPmpName) {
    return detail::natpmp_map(m.internal_port, m.external_port, options.lifetime, options.natpmp_timeout, m.gateway);
  }
  if (m.protocol == kUpnpIgdName) {
    return detail::upnp_map(m.internal_port, m.external_port, options.lifetime, options.upnp_discovery_timeout,
                            options.description, m.gateway);
  }
  return make_error(ErrorCode::kInvalidArgument, "unknown port mapping protocol '" + m.protocol + "'");
}

Status unmap(const Mapping& m, const MapOptions& options) {
  if (m.protocol == kNatPmpName) return detail::natpmp_unmap(m, options.natpmp_timeout);
  if (m.protocol == kUpnpIgdName) return detail::upnp_unmap(m);
  return make_error(ErrorCode::kInvalidArgument, "unknown port mapping protocol '" + m.protocol + "'");
}

Result<ProbeResult> probe(const MapOptions& options) {
  ProbeResult r;
  if (allows(options.method, Method::kNatPmp)) {
    auto a = detail::natpmp_public_address(options.natpmp_timeout);
    if (a.ok()) {
      r.natpmp = {.available = true, .external_ip = a->external_ip, .gateway = a->gateway, .error = ""};
    } else {
      r.natpmp.error = a.error().message();
    }
  } else {
    r.natpmp.error = "not tried";
  }
  if (allows(options.method, Method::kUpnpIgd)) {
    auto a = detail::upnp_external_address(options.upnp_discovery_timeout);
    if (a.ok()) {
      r.upnp = {.available = true, .external_ip = a->external_ip, .gateway = a->root_desc_url, .error = ""};
    } else {
      r.upnp.error = a.error().message();
    }
  } else {
    r.upnp.error = "not tried";
  }
  return r;
}

nlohmann::json ProbeResult::to_json() const {
  auto one = [](const Answer& a) {
    nlohmann::json j = {{"available", a.available}};
    if (a.available) {
      j["external_ip"] = a.external_ip;
      j["gateway"] = a.gateway;
      j["double_nat"] = is_private_ipv4(a.external_ip);
    } else {
      j["error"] = a.error;
    }
    return j;
  };
  nlohmann::json j = {{"nat_pmp", one(natpmp)}, {"upnp_igd", one(upnp)}};
  if (!any()) j["advice"] = no_gateway_message(natpmp.error, upnp.error);
  return j;
}

bool is_private_ipv4(const std::string& dotted) {
  in_addr a{};
  if (::inet_pton(AF_INET, dotted.c_str(), &a) != 1) return false;
  uint32_t v = ntohl(a.s_addr);
  auto in = [v](uint32_t net, int bits) { return (v >> (32 - bits)) == (net >> (32 - bits)); };
  return in(0x0A000000, 8) ||   // 10/8
         in(0xAC100000, 12) ||  // 172.16/12
         in(0xC0A80000, 16) ||  // 192.168/16
         in(0x64400000, 10) ||  // 100.64/10, carrier-grade NAT (RFC 6598)
         in(0x7F000000, 8) ||   // loopback
         in(0xA9FE0000, 16) ||  // link-local
         v == 0;
}

}  // namespace yonder::portmap
