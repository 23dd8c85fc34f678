#include "net/reach/dial_back_core.h"

#include <algorithm>

#include "relay/path_hint.h"

namespace yonder::reach {

std::vector<std::string> dial_back_candidates(const std::vector<std::string>& advertised, const std::string& mapped,
                                              const std::vector<std::string>& observed_hosts, uint16_t link_port) {
  std::vector<std::string> out;
  auto add = [&](const std::string& address) {
    if (out.size() >= kMaxDialBackAddresses || !relay::is_public_ipv4_endpoint(address)) return;
    if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
  };
  for (const auto& a : advertised) add(a);
  if (!mapped.empty()) add(mapped);
  if (link_port != 0) {
    for (const auto& h : observed_hosts) add(h + ":" + std::to_string(link_port));
  }
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
                               const std::vector<DialBackAnswer>& answers) {
  using State = Reachability::State;
  Reachability r;
  r.tested = candidates;
  if (candidates.empty()) {
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
  std::vector<std::string> unanswered;
  for (const auto& a : answers) {
    if (a.error) {
      unanswered.push_back(a.helper + " (" + *a.error + ")");
      continue;
    }
    bool any = std::any_of(a.reached.begin(), a.reached.end(), [](const auto& kv) { return kv.second; });
    (any ? r.confirmed_by : r.failed_by).push_back(a.helper);
  }
  if (!r.confirmed_by.empty()) {
    r.state = State::kReachable;
    for (const auto& c : candidates) {
      bool reached = std::any_of(answers.begin(), answers.end(), [&](const DialBackAnswer& a) {
        auto it = a.reached.find(c);
        return !a.error && it != a.reached.end() && it->second;
      });
      if (reached) {
        r.address = c;
        break;
      }
    }
    r.why = "reached at " + r.address + " by " + joined(r.confirmed_by);
    return r;
  }
  if (!r.failed_by.empty()) {
    r.state = State::kUnreachable;
    r.why = joined(r.failed_by) + " could not reach this node at " + joined(candidates) +
            ": peers reach it through relays or punched paths (to be reachable, forward the link's port on the "
            "router: link.port_mapping, or by hand with link.advertise)";
    return r;
  }
  r.why = "no peer answered: " + joined(unanswered);
  return r;
}

Status DialBackGate::admit(const PublicKeyBytes& peer, size_t address_count, MonoTime now) {
  if (address_count == 0 || address_count > kMaxDialBackAddresses) {
    return make_error(ErrorCode::kInvalidArgument, "a dial-back request names 1 to " +
                                                       std::to_string(kMaxDialBackAddresses) + " addresses");
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
