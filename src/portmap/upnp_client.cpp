// UPnP-IGD through miniupnpc. The exchange: an SSDP M-SEARCH multicast to
// 239.255.255.250:1900 on the LAN, answered by unicast with the location of
// the IGD's root description (XML over HTTP); then SOAP calls on its
// WANIPConnection (or WANPPPConnection) service: GetExternalIPAddress,
// AddPortMapping, DeletePortMapping (UPnP Forum, WANIPConnection:1 and :2).
//
// miniupnpc parses the SSDP replies, the XML and the SOAP answers; we bound
// the search with our own delay, and check the address it hands back.
#include <arpa/inet.h>
#include <miniupnpc/miniupnpc.h>
#include <miniupnpc/upnpcommands.h>
#include <miniupnpc/upnperrors.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "portmap/gateway_clients.h"

namespace yonder::portmap::detail {
namespace {

// UPnP error codes (WANIPConnection:1 and :2) we act on.
constexpr int kConflictInMappingEntry = 718;
constexpr int kOnlyPermanentLeasesSupported = 725;
// How many other external ports to try when the one we want is taken.
constexpr int kPortAttempts = 6;

// An IGD found by search or by URL; frees miniupnpc's allocations.
struct Igd {
  UPNPUrls urls{};
  IGDdatas data{};
  char lanaddr[64] = {};
  bool has_urls = false;
  bool connected = true;  // as UPNP_GetValidIGD judged it
  Igd() = default;
  Igd(const Igd&) = delete;
  Igd& operator=(const Igd&) = delete;
  ~Igd() {
    if (has_urls) FreeUPNPUrls(&urls);
  }
  const char* control() const { return urls.controlURL; }
  const char* service() const { return data.first.servicetype; }
  std::string root() const { return urls.rootdescURL ? urls.rootdescURL : ""; }
};

std::string upnp_code_text(int code) {
  const char* s = strupnperror(code);
  return std::to_string(code) + (s ? std::string(" ") + s : std::string());
}

Result<std::unique_ptr<Igd>> discover(std::chrono::milliseconds timeout) {
  int err = 0;
  int delay = static_cast<int>(std::max<int64_t>(timeout.count(), 100));
  // All the types in one burst, then one wait of `delay`: upnpDiscover()
  // would try four types one after the other, waiting `delay` for each.
  static const char* const kTypes[] = {
      "urn:schemas-upnp-org:device:InternetGatewayDevice:1", "urn:schemas-upnp-org:device:InternetGatewayDevice:2",
      "urn:schemas-upnp-org:service:WANIPConnection:1",      "urn:schemas-upnp-org:service:WANIPConnection:2",
      "urn:schemas-upnp-org:service:WANPPPConnection:1",     nullptr};
  UPNPDev* devs = upnpDiscoverDevices(kTypes, delay, nullptr, nullptr, UPNP_LOCAL_PORT_ANY, 0, 2, &err, 1);
  if (devs == nullptr) {
    return make_error(ErrorCode::kUnavailable,
                      err == UPNPDISCOVER_SUCCESS
                          ? "UPnP-IGD: no device answered the SSDP search within " + std::to_string(delay) + " ms"
                          : "UPnP-IGD: the SSDP search failed (error " + std::to_string(err) + ")");
  }
  auto igd = std::make_unique<Igd>();
  int r = UPNP_GetValidIGD(devs, &igd->urls, &igd->data, igd->lanaddr, sizeof igd->lanaddr);
  freeUPNPDevlist(devs);
  igd->has_urls = r != 0;
  switch (r) {
    case 1: return igd;
    case 2:
      // "Not connected": the IGD says its link is down, or (miniupnpc 2.2)
      // its external address is private or reserved. The latter is a double
      // NAT, which the caller reports; the former fails at the next call.
      igd->connected = false;
      return igd;
    case 3:
      return make_error(ErrorCode::kUnavailable,
                        "UPnP-IGD: UPnP devices answered, but none is an internet gateway (IGD)");
    default: return make_error(ErrorCode::kUnavailable, "UPnP-IGD: no internet gateway (IGD) answered");
  }
}

Result<std::unique_ptr<Igd>> from_url(const std::string& url) {
  auto igd = std::make_unique<Igd>();
  int r = UPNP_GetIGDFromUrl(url.c_str(), &igd->urls, &igd->data, igd->lanaddr, sizeof igd->lanaddr);
  igd->has_urls = r != 0;
  if (r == 0) {
    return make_error(ErrorCode::kUnavailable, "UPnP-IGD: the gateway at " + url + " no longer answers");
  }
  return igd;
}

Result<std::string> external_ip(const Igd& igd) {
  char buf[64] = {};
  int r = UPNP_GetExternalIPAddress(igd.control(), igd.service(), buf);
  buf[sizeof buf - 1] = '\0';
  if (r == UPNPCOMMAND_SUCCESS) {
    auto ip = checked_ipv4(buf, "UPnP-IGD: the gateway's external address");
    if (ip.ok()) return ip;
  }
  if (!igd.connected) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "UPnP-IGD: the gateway at " + igd.root() + " reports its internet connection as down");
  }
  return make_error(ErrorCode::kInternal, "UPnP-IGD: the gateway at " + igd.root() +
                                              " did not tell its external address (" + upnp_code_text(r) + ")");
}

int add(const Igd& igd, uint16_t ext, uint16_t in, const std::string& client, const std::string& desc,
        const std::string& lease) {
  auto e = std::to_string(ext), i = std::to_string(in);
  return UPNP_AddPortMapping(igd.control(), igd.service(), e.c_str(), i.c_str(), client.c_str(), desc.c_str(), "TCP",
                             nullptr, lease.c_str());
}

}  // namespace

Result<std::string> checked_ipv4(const char* text, const char* what) {
  in_addr a{};
  if (text == nullptr || ::inet_pton(AF_INET, text, &a) != 1 || a.s_addr == 0) {
    return make_error(ErrorCode::kInternal, std::string(what) + " is not an IPv4 address");
  }
  char out[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, out, sizeof out);
  return std::string(out);
}

Result<UpnpAddress> upnp_external_address(std::chrono::milliseconds discovery_timeout) {
  auto igd = discover(discovery_timeout);
  if (!igd.ok()) return std::move(igd).error();
  auto ip = external_ip(**igd);
  if (!ip.ok()) return std::move(ip).error();
  return UpnpAddress{.root_desc_url = (*igd)->root(), .external_ip = *ip};
}

Result<Mapping> upnp_map(uint16_t internal_port, uint16_t external_port, std::chrono::seconds lifetime,
                         std::chrono::milliseconds discovery_timeout, const std::string& description,
                         const std::string& root_desc_url) {
  auto found = root_desc_url.empty() ? discover(discovery_timeout) : from_url(root_desc_url);
  if (!found.ok()) return std::move(found).error();
  const Igd& igd = **found;
  auto ip = external_ip(igd);
  if (!ip.ok()) return std::move(ip).error();
  std::string client = igd.lanaddr;
  if (!checked_ipv4(client.c_str(), "local address").ok()) {
    return make_error(ErrorCode::kInternal, "UPnP-IGD: could not tell which local address talks to the gateway");
  }

  // The port we want first, then a few random ones if it is taken by
  // another host's mapping.
  std::vector<uint16_t> ports{external_port};
  std::random_device rd;
  std::uniform_int_distribution<int> dist(1024, 65535);
  for (int i = 0; i < kPortAttempts; ++i) ports.push_back(static_cast<uint16_t>(dist(rd)));

  std::string lease = std::to_string(lifetime.count());
  int last = 0;
  for (uint16_t ext : ports) {
    int r = add(igd, ext, internal_port, client, description, lease);
    if (r == kOnlyPermanentLeasesSupported && lease != "0") {
      // IGDv1 routers that only keep permanent mappings: we remove it on exit
      // and re-add it on every renewal.
      lease = "0";
      r = add(igd, ext, internal_port, client, description, lease);
    }
    if (r == UPNPCOMMAND_SUCCESS) {
      Mapping m;
      m.protocol = kUpnpIgdName;
      m.external_ip = *ip;
      m.external_port = ext;
      m.internal_port = internal_port;
      m.lifetime = std::chrono::seconds(std::stoll(lease));
      m.gateway = igd.root();
      m.internal_client = client;
      return m;
    }
    last = r;
    if (r != kConflictInMappingEntry) break;
  }
  if (last == kConflictInMappingEntry) {
    return make_error(ErrorCode::kResourceExhausted, "UPnP-IGD: the gateway at " + igd.root() +
                                                         " has the external ports we asked for mapped to "
                                                         "other hosts; remove stale port mappings on the router");
  }
  return make_error(ErrorCode::kPermissionDenied,
                    "UPnP-IGD: the gateway at " + igd.root() + " refused the mapping (" + upnp_code_text(last) +
                        "); allow UPnP port mappings for this host in the router's settings");
}

Status upnp_unmap(const Mapping& m) {
  auto found = from_url(m.gateway);
  if (!found.ok()) return std::move(found).error();
  const Igd& igd = **found;
  auto e = std::to_string(m.external_port);
  int r = UPNP_DeletePortMapping(igd.control(), igd.service(), e.c_str(), "TCP", nullptr);
  if (r != UPNPCOMMAND_SUCCESS) {
    return make_error(ErrorCode::kInternal, "UPnP-IGD: the gateway at " + m.gateway +
                                                " did not remove the mapping of port " + e + " (" + upnp_code_text(r) +
                                                "); remove it in the router's settings");
  }
  return ok_status();
}

}  // namespace yonder::portmap::detail
