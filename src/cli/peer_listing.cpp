#include "cli/peer_listing.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/terminal_text.h"
#include "cli/shown.h"
#include "crypto/scope.h"

namespace yonder::cli {
std::string local_minute(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string peers_table(const nlohmann::json& peers) {
  char buf[1024];  // a line: the path is cut past it
  std::snprintf(buf, sizeof buf, "%-16s  %-7s  %-9s  %-16s  %-40s  %s\n", "NAME", "ID", "STATE", "LAST SEEN",
                "THEY MAY (HERE)", "PATH");
  std::string out = buf;
  for (const auto& p : peers) {
    bool connected = p.value("connected", false);
    std::string state = p.value("denied", false) ? "denied" : connected ? "connected" : "idle";
    std::string seen = connected ? "now"
                       : p.contains("last_seen_at") && p["last_seen_at"].is_number()
                           ? local_minute(p["last_seen_at"].get<int64_t>())
                           : "never";
    std::string ours;  // "": it granted us nothing (it paired with us)
    if (p.contains("granted_to_us") && p["granted_to_us"].is_object()) {
      auto scope = scope_from_json(p["granted_to_us"]);
      ours = !scope ? "(unreadable: " + scope.error().message() + ")" : scope->capabilities ? scope->summary() : "nothing";
    }
    std::string path = p.value("path", "");
    if (p.contains("rtt_ms") && p["rtt_ms"].is_number()) {
      path += " (" + std::to_string(static_cast<int>(p["rtt_ms"].get<double>() * 1000) / 1000.0).substr(0, 5) + " ms)";
    }
    // On the relay: why there is no direct path (or that one is being punched).
    if (p.contains("punch") && p["punch"].is_object() && p.value("path_kind", "") == "relay") {
      const auto& pu = p["punch"];
      std::string st = pu.value("state", "");
      if (st == "failed") {
        path += "; no direct path: " + shown(pu, "reason", "");
      } else if (!st.empty() && st != "punched") {
        path += "; direct path: " + st;
      }
    }
    std::snprintf(buf, sizeof buf, "%-16s  %-7s  %-9s  %-16s  %-40s  %s\n",
                  shown(p, "name", "").substr(0, 16).c_str(), p.value("node_id", "").substr(0, 7).c_str(), state.c_str(),
                  seen.c_str(), shown(p, "grant_summary", "").substr(0, 40).c_str(), path.c_str());
    out += buf;
    // What it lets us do there: on a line of its own, whole (it is what a
    // consumer most wants to know of its provider).
    if (!ours.empty()) out += "  we may (there): " + ours + "\n";
    std::string notice = shown(p, "provider_notice", "");
    if (!notice.empty()) out += "  the provider says: " + notice + "\n";
  }
  return out;
}

std::string peer_detail(const nlohmann::json& p) {
  std::string out;
  auto line = [&out](const char* label, const std::string& value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%-14s", label);
    out += buf + value + "\n";
  };
  bool connected = p.value("connected", false);
  line("Name", shown(p, "name", ""));
  line("Node", p.value("node_id", ""));
  line("State", p.value("denied", false) ? "denied" : connected ? "connected" : "idle");
  int64_t paired = p.contains("paired_at") && p["paired_at"].is_number() ? p["paired_at"].get<int64_t>() : 0;
  line("Paired", paired > 0 ? local_minute(paired) : "-");
  std::string digits = shown(p, "check_digits", "");
  line("Check digits", digits.empty() ? "- (paired before check digits were kept)"
                                      : digits + " (the same on both sides, or someone was in the middle)");
  line("They may here", shown(p, "grant_summary", "nothing"));
  if (p.contains("granted_to_us") && p["granted_to_us"].is_object()) {
    auto scope = scope_from_json(p["granted_to_us"]);
    line("We may there", !scope ? "(unreadable: " + scope.error().message() + ")"
                         : scope->capabilities ? scope->summary()
                                               : "nothing");
  }
  std::string addresses;
  if (p.contains("addresses") && p["addresses"].is_array()) {
    for (const auto& a : p["addresses"]) {
      if (a.is_string()) addresses += (addresses.empty() ? "" : ", ") + terminal_safe(a.get<std::string>());
    }
  }
  line("Addresses", addresses.empty() ? "-" : addresses);
  if (connected) {
    std::string path = shown(p, "path", "");
    if (p.contains("rtt_ms") && p["rtt_ms"].is_number()) {
      char rtt[32];
      std::snprintf(rtt, sizeof rtt, " (%.1f ms)", p["rtt_ms"].get<double>());
      path += rtt;
    }
    line("Path", path);
  }
  line("Last seen", connected ? "now"
                    : p.contains("last_seen_at") && p["last_seen_at"].is_number()
                        ? local_minute(p["last_seen_at"].get<int64_t>())
                        : "never");
  std::string notice = shown(p, "provider_notice", "");
  if (!notice.empty()) line("Provider says", notice);
  return out;
}

namespace {

// The host of "host:port" or "[v6]:port".
std::string host_of(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(1, address.find(']') - 1);
  return address.substr(0, address.rfind(':'));
}

bool is_loopback(const std::string& host) { return host.rfind("127.", 0) == 0 || host == "::1" || host == "localhost"; }

bool is_private(const std::string& host) {
  unsigned a = 0, b = 0;
  if (std::sscanf(host.c_str(), "%u.%u.", &a, &b) == 2 && host.find_first_not_of("0123456789.") == std::string::npos) {
    return a == 10 || (a == 172 && b >= 16 && b <= 31) || (a == 192 && b == 168) || (a == 100 && b >= 64 && b <= 127) ||
           (a == 169 && b == 254);
  }
  std::string h = host;
  for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h.rfind("fc", 0) == 0 || h.rfind("fd", 0) == 0 || h.rfind("fe80:", 0) == 0;
}

}  // namespace

std::string share_reach_warning(const std::vector<std::string>& addresses, const std::vector<std::string>& relays) {
  if (!relays.empty() || addresses.empty()) return "";
  bool all_loopback = true, all_local = true;
  std::string shown_addresses;
  for (const auto& a : addresses) {
    std::string host = host_of(a);
    all_loopback = all_loopback && is_loopback(host);
    all_local = all_local && (is_loopback(host) || is_private(host));
    shown_addresses += (shown_addresses.empty() ? "" : ", ") + a;
  }
  if (all_loopback) {
    return "this link reaches only this machine (it names " + shown_addresses +
           "): a peer on another machine cannot pair with it. Set link.listen to an address others reach (the "
           "default 0.0.0.0:7850 listens on every interface), or name a relay in link.relays, then share again";
  }
  if (all_local) {
    return "this link names only private addresses (" + shown_addresses +
           "): it works for a peer on this network or a VPN such as Tailscale, not for one elsewhere. For a friend "
           "in another home, name a relay in link.relays, keep link.port_mapping on with a router that allows it, or "
           "set link.advertise to a public HOST:PORT forwarded to this node; `yonder netcheck` shows what this node "
           "has";
  }
  return "";
}

std::string links_table(const nlohmann::json& links) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%-32s  %-8s  %-9s  %-16s  %s\n", "ID", "STATE", "USED", "EXPIRES", "SCOPE");
  std::string out = buf;
  for (const auto& l : links) {
    int64_t total = l.value("uses_total", int64_t{0}), left = l.value("uses_left", int64_t{0});
    std::string used = std::to_string(total - left) + " of " + std::to_string(total);
    std::snprintf(buf, sizeof buf, "%-32s  %-8s  %-9s  %-16s  %s\n", l.value("id", "").c_str(),
                  l.value("state", "").c_str(), used.c_str(), local_minute(l.value("expires_at", int64_t{0})).c_str(),
                  shown(l, "summary", "").c_str());
    out += buf;
  }
  return out;
}

nlohmann::json newly_paired(const nlohmann::json& before, const nlohmann::json& after) {
  auto rows = [](const nlohmann::json& answer) {
    auto a = answer.is_object() ? answer.find("peers") : answer.end();
    return a != answer.end() && a->is_array() ? *a : nlohmann::json::array();
  };
  auto text = [](const nlohmann::json& row, const char* key) {
    auto v = row.is_object() ? row.find(key) : row.end();
    return v != row.end() ? v->dump() : std::string();
  };
  nlohmann::json found = nullptr;
  for (const auto& now : rows(after)) {
    bool same = false;
    for (const auto& was : rows(before)) {
      if (text(was, "node_id") != text(now, "node_id")) continue;
      same = text(was, "paired_at") == text(now, "paired_at") && text(was, "check_digits") == text(now, "check_digits");
    }
    if (!same) found = now;
  }
  return found;
}

}  // namespace yonder::cli
