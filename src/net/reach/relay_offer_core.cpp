#include "net/reach/relay_offer_core.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "relay/path_hint.h"

namespace yonder::reach {

Result<RelayOfferMode> parse_relay_offer_mode(const std::string& text) {
  if (text == "auto") return RelayOfferMode::kAuto;
  if (text == "off") return RelayOfferMode::kOff;
  return make_error(ErrorCode::kInvalidArgument,
                    "relay.offer must be \"auto\" (offer a relay to paired peers once they confirm this node is "
                    "reachable) or \"off\", not \"" + text.substr(0, 32) + "\"");
}

bool reachability_check_due(RelayOfferMode mode, bool listening_beyond_loopback, bool round_in_progress,
                            const std::optional<MonoTime>& last_round, const std::optional<Reachability>& verdict,
                            MonoTime now) {
  if (mode == RelayOfferMode::kOff || !listening_beyond_loopback || round_in_progress) return false;
  if (!last_round) return true;
  const bool unknown = !verdict || verdict->state == Reachability::State::kUnknown;
  return now - *last_round >= (unknown ? std::chrono::duration_cast<std::chrono::nanoseconds>(kRecheckAfterUnknown)
                                       : std::chrono::duration_cast<std::chrono::nanoseconds>(kRecheckAfterVerdict));
}

OfferDecision decide_offer(const OfferFacts& f) {
  OfferDecision d;
  const bool opened_by_offer = !f.relay_configured && (f.relay_port != 0 || !f.relay_mapped.empty());
  if (f.mode == RelayOfferMode::kOff) {
    d.why = "relay.offer is off";
    d.stop_relay = opened_by_offer;
    return d;
  }
  if (!f.verdict) {
    d.why = "not offered until paired peers confirm this node is reachable";
    return d;
  }
  if (f.verdict->state == Reachability::State::kUnreachable) {
    d.why = "not offered: paired peers could not reach this node";
    d.stop_relay = opened_by_offer;
    return d;
  }
  if (f.verdict->state != Reachability::State::kReachable) {
    d.why = "not offered: no paired peer has confirmed this node is reachable yet";
    return d;
  }
  const std::string& reached = f.verdict->address;
  auto colon = reached.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    d.why = "not offered: the reachable address has no host";
    return d;
  }
  d.run_relay = true;
  if (!f.link_mapped.empty() && reached == f.link_mapped) {
    // Reached through the router's forward of the link port: the relay's
    // port needs a forward of its own.
    d.map_relay = true;
    if (f.relay_mapped.empty()) {
      d.why = "not offered yet: peers reach this node through the router's port mapping, and the router has not "
              "mapped the relay's port yet";
      return d;
    }
    d.address = f.relay_mapped;
    return d;
  }
  if (f.relay_port == 0) {
    d.why = "not offered yet: the relay is starting";
    return d;
  }
  d.address = reached.substr(0, colon) + ":" + std::to_string(f.relay_port);
  return d;
}

std::string default_relay_listen(const std::string& relay_listen, const std::string& link_listen) {
  if (!relay_listen.empty()) return relay_listen;
  auto colon = link_listen.rfind(':');
  if (colon == std::string::npos) return "";
  const std::string port_text = link_listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "";
  }
  unsigned long port = std::stoul(port_text);
  if (port > 65534) return "";
  return link_listen.substr(0, colon + 1) + std::to_string(port == 0 ? 0 : port + 1);
}

nlohmann::json relay_offer_body(const std::string& address) { return {{"address", address}}; }

Result<std::string> read_relay_offer(const nlohmann::json& body, const std::vector<std::string>& own_hosts) {
  if (!body.is_object()) return make_error(ErrorCode::kInvalidArgument, "a relay offer must be a JSON object");
  auto a = body.find("address");
  if (a == body.end() || !a->is_string()) {
    return make_error(ErrorCode::kInvalidArgument, "a relay offer needs \"address\": \"IP:PORT\" (or \"\")");
  }
  const std::string& address = a->get_ref<const std::string&>();
  if (address.empty()) return std::string();
  const std::string shown = address.substr(0, 64);
  if (!relay::is_public_ipv4_endpoint(address)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "relay offer " + shown + " refused: not a public IPv4 address with a port");
  }
  const std::string host = address.substr(0, address.rfind(':'));
  if (std::find(own_hosts.begin(), own_hosts.end(), host) != own_hosts.end()) {
    return make_error(ErrorCode::kPermissionDenied, "relay offer " + shown + " refused: this host's own address");
  }
  return address;
}

std::vector<PeerOffer> choose_offered_relays(std::vector<PeerOffer> offers, bool offering_ourselves, size_t max) {
  if (offering_ourselves) return {};
  std::sort(offers.begin(), offers.end(), [](const PeerOffer& a, const PeerOffer& b) {
    if (a.rtt_ms.has_value() != b.rtt_ms.has_value()) return a.rtt_ms.has_value();
    if (a.rtt_ms && *a.rtt_ms != *b.rtt_ms) return *a.rtt_ms < *b.rtt_ms;
    if (a.peer != b.peer) return a.peer < b.peer;
    return a.address < b.address;
  });
  std::vector<PeerOffer> out;
  std::set<PublicKeyBytes> peers;
  std::set<std::string> addresses;
  for (auto& o : offers) {
    if (out.size() >= max) break;
    if (o.address.empty() || !peers.insert(o.peer).second || !addresses.insert(o.address).second) continue;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace yonder::reach
