#include "net/reach/dial_back_core.h"

#include <algorithm>

#include "relay/path_hint.h"

namespace yonder::reach {
namespace {
// One candidate more: public IPv4 only, each once, at most kMaxDialBackAddresses.
void add_candidate(std::vector<std::string>& out, const std::string& address) {
  if (out.size() >= kMaxDialBackAddresses || !relay::is_public_ipv4_endpoint(address)) return;
  if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
}
}  // namespace

std::vector<std::string> dial_back_candidates(const std::vector<std::string>& advertised, const std::string& mapped,
                                              const std::vector<std::string>& observed_hosts, uint16_t link_port) {
  std::vector<std::string> out;
  auto add = [&](const std::string& address) { add_candidate(out, address); };
  for (const auto& a : advertised) add(a);
  if (!mapped.empty()) add(mapped);
  if (link_port != 0) {
    for (const auto& h : observed_hosts) add(h + ":" + std::to_string(link_port));
  }
  return out;
}

std::vector<std::string> udp_dial_back_candidates(const std::vector<std::string>& advertised, uint16_t udp_port,
                                                  const std::string& stun_public) {
  std::vector<std::string> out;
  if (udp_port == 0) return out;
  auto add = [&](const std::string& address) { add_candidate(out, address); };
  for (const auto& a : advertised) {
    auto colon = a.rfind(':');
    if (colon != std::string::npos) add(a.substr(0, colon) + ":" + std::to_string(udp_port));
  }
  if (!stun_public.empty()) add(stun_public);
  return out;
}

std::vector<Helper> pick_helpers(std::vector<Helper> connected, size_t n) {
  std::erase_if(connected, [](const Helper& h) { return h.path.rfind("lan", 0) == 0; });
  std::sort(connected.begin(), connected.end(), [](const Helper& a, const Helper& b) {
    if (a.rtt_ms.has_value() != b.rtt_ms.has_value()) return a.rtt_ms.has_value();
    if (a.rtt_ms && *a.rtt_ms != *b.rtt_ms) return *a.rtt_ms < *b.rtt_ms;
    return a.key < b.key;
  });
  std::vector<Helper> out;
  for (auto& h : connected) {
    if (out.size() >= n) break;
    bool seen = std::any_of(out.begin(), out.end(), [&](const Helper& o) { return o.key == h.key; });
    if (!seen) out.push_back(std::move(h));
  }
  return out;
}

const char* transport_name(Transport transport) { return transport == Transport::kUdp ? "udp" : "tcp"; }

const char* reachability_state_name(Reachability::State state) {
  switch (state) {
    case Reachability::State::kReachable:
      return "reachable";
    case Reachability::State::kUnreachable:
      return "unreachable";
    case Reachability::State::kUnknown:
      break;
  }
  return "unknown";
}

namespace {
std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}
}  // namespace

Reachability dial_back_verdict(const std::vector<std::string>& candidates, bool listening,
                               const std::vector<DialBackAnswer>& answers, Transport transport) {
  using State = Reachability::State;
  const bool udp = transport == Transport::kUdp;
  Reachability r;
  r.tested = candidates;
  if (candidates.empty()) {
    if (udp) {
      r.why = listening ? "no public UDP address to test: this node advertises none and no relay's STUN saw its "
                          "UDP socket (set link.advertise or link.relays)"
                        : "this node has no UDP socket (link.hole_punching = false)";
      return r;
    }
    r.why = listening ? "no public address to test: this node advertises none, its router maps no port and no "
                        "relay saw its public IP (set link.advertise, link.port_mapping or link.relays)"
                      : "this node does not listen for links (link.listen is empty): peers reach it through "
                        "relays or punched paths";
    return r;
  }
  if (answers.empty()) {
    r.why = "no paired peer outside this LAN is connected to ask; `yonder netcheck` asks again";
    return r;
  }
  auto results = [udp](const DialBackAnswer& a) -> const std::map<std::string, bool>& {
    return udp ? a.reached_udp : a.reached;
  };
  std::vector<std::string> unanswered;
  for (const auto& a : answers) {
    if (a.error) {
      unanswered.push_back(a.helper + " (" + *a.error + ")");
      continue;
    }
    if (udp && !a.tested_udp) {
      unanswered.push_back(a.helper + " (did not dial over UDP: its link does not use UDP, or it runs an older yonder)");
      continue;
    }
    const auto& reached = results(a);
    bool any = std::any_of(reached.begin(), reached.end(), [](const auto& kv) { return kv.second; });
    (any ? r.confirmed_by : r.failed_by).push_back(a.helper);
  }
  if (!r.confirmed_by.empty()) {
    r.state = State::kReachable;
    for (const auto& c : candidates) {
      bool reached = std::any_of(answers.begin(), answers.end(), [&](const DialBackAnswer& a) {
        const auto& m = results(a);
        auto it = m.find(c);
        return !a.error && it != m.end() && it->second;
      });
      if (reached) {
        r.address = c;
        break;
      }
    }
    r.why = std::string(udp ? "reached over UDP at " : "reached at ") + r.address + " by " + joined(r.confirmed_by);
    return r;
  }
  if (!r.failed_by.empty()) {
    r.state = State::kUnreachable;
    r.why = udp ? joined(r.failed_by) + " could not reach this node over UDP at " + joined(candidates) +
                      ": its router or firewall drops UDP from peers it has not sent to first, so peers reach it "
                      "over TCP, relays or punched paths (to be reachable over UDP, forward the UDP port that "
                      "link.udp_listen names on the router)"
                : joined(r.failed_by) + " could not reach this node at " + joined(candidates) +
                      ": peers reach it through relays or punched paths (to be reachable, forward the link's port "
                      "on the router: link.port_mapping, or by hand with link.advertise)";
    return r;
  }
  r.why = "no peer answered: " + joined(unanswered);
  return r;
}

Status DialBackGate::admit(const PublicKeyBytes& peer, size_t address_count, MonoTime now, size_t udp_count) {
  if (address_count + udp_count == 0 || address_count > kMaxDialBackAddresses || udp_count > kMaxDialBackAddresses) {
    return make_error(ErrorCode::kInvalidArgument, "a dial-back request names 1 to " +
                                                       std::to_string(kMaxDialBackAddresses) +
                                                       " addresses per transport (TCP and UDP)");
  }
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    it = buckets_.emplace(peer, TokenBucket(1.0 / static_cast<double>(kInterval.count()), kBurst, now)).first;
  }
  if (!it->second.take(now)) {
    return make_error(ErrorCode::kResourceExhausted, "too many dial-back requests: at most " + std::to_string(kBurst) +
                                                         " at once, then one every " +
                                                         std::to_string(kInterval.count()) + " s; try again later");
  }
  return ok_status();
}

}  // namespace yonder::reach
