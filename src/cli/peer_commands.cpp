#include "cli/peer_commands.h"

#include <qrencode.h>

#include <cstdio>
#include <ctime>
#include <time.h>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "base/suggest.h"
#include "cli/exit_codes.h"
#include "cli/peer_listing.h"
#include "cli/shown.h"
#include "crypto/scope.h"
#include "os/unix_http.h"

namespace yonder::cli {
namespace {

// Calls the daemon with a JSON body; prints failures; returns the reply.
Result<nlohmann::json> post(const Context& ctx, const std::string& path, const nlohmann::json& body,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  os::HttpRequestOptions opts;
  opts.timeout = timeout;
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), body.is_null() ? "GET" : "POST", path,
                                 body.is_null() ? std::string() : body.dump(), opts);
  if (!r) return std::move(r).error();
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    if (j.is_object() && j.contains("error") && j["error"].is_object()) {
      std::string code = j["error"].value("code", "");
      ErrorCode ec = error_code_from_name(code);
      return make_error(ec, j["error"].value("message", "yonderd refused the request"));
    }
    return make_error(ErrorCode::kInternal, "yonderd answered HTTP " + std::to_string(r->status));
  }
  if (!j.is_object()) return make_error(ErrorCode::kInternal, "yonderd sent a reply that is not JSON");
  return j;
}

int peer_fail(const Context& ctx, const Error& e) {
  if (e.code() == ErrorCode::kUnavailable && e.message().rfind("cannot connect to", 0) == 0) {
    return report_daemon_error(ctx, e);
  }
  return print_error(e, e.code() == ErrorCode::kInvalidArgument ? kExitUsage : kExitError);
}

// Adds the optional scope flags to a request body, converting units.
Status add_limits(nlohmann::json& body, const std::optional<int>& gpus, const std::optional<int>& max_jobs,
                  const std::optional<std::string>& vram, const std::optional<std::string>& max_time,
                  const std::optional<std::string>& memory, const std::optional<std::string>& disk,
                  const std::optional<std::string>& cpus) {
  if (gpus) {
    if (*gpus < 0) return make_error(ErrorCode::kInvalidArgument, "--gpus must be 0 or more");
    body["gpus"] = *gpus;
  }
  if (max_jobs) {
    if (*max_jobs < 1) return make_error(ErrorCode::kInvalidArgument, "--max-jobs must be 1 or more");
    body["max_jobs"] = *max_jobs;
  }
  auto size = [&](const std::optional<std::string>& v, const char* field, const char* flag) -> Status {
    if (!v) return ok_status();
    auto n = parse_resource_size(*v, flag);
    if (!n) return std::move(n).error();
    body[field] = *n;
    return ok_status();
  };
  YONDER_TRY(size(vram, "vram_bytes", "--vram"));
  YONDER_TRY(size(memory, "memory_bytes", "--memory"));
  YONDER_TRY(size(disk, "disk_bytes", "--disk"));
  if (max_time) {
    auto d = parse_duration_s(*max_time);
    if (!d) return std::move(d).error();
    body["max_time_s"] = *d;
  }
  if (cpus) {
    char* end = nullptr;
    double c = std::strtod(cpus->c_str(), &end);
    if (end == cpus->c_str() || *end != '\0' || c <= 0 || c > 4096) {
      return make_error(ErrorCode::kInvalidArgument, "--cpus must be a number like 2 or 0.5");
    }
    body["cpus_milli"] = static_cast<uint64_t>(c * 1000);
  }
  return ok_status();
}

void peer_print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// `share --wait`: asks the daemon every quarter second until link `id` has
// been used once more, then prints who paired and the pairing's check
// digits, for the provider to compare with the ones `pair` printed on the
// other side. Ends when the link can no longer be used (expired, revoked).
int wait_for_pairing(const Context& ctx, const std::string& id, int uses, const nlohmann::json& before) {
  std::fprintf(stderr, "Waiting for the link to be used (Ctrl-C stops waiting; the link stays valid)...\n");
  while (true) {
    auto links = post(ctx, "/v1/links", nullptr);
    if (!links) return peer_fail(ctx, links.error());
    nlohmann::json link;
    for (const auto& l : links->value("links", nlohmann::json::array())) {
      if (l.is_object() && l.value("id", "") == id) link = l;
    }
    if (!link.is_object()) return print_error(make_error(ErrorCode::kNotFound, "link " + id + " is gone"), kExitError);
    std::string state = link.value("state", "");
    bool used = link.contains("uses_left") && link["uses_left"].is_number_integer() && link["uses_left"].get<int>() < uses;
    if (used) break;
    if (state != "active") {
      return print_error(make_error(ErrorCode::kFailedPrecondition, "link " + id + " is " + state +
                                                                        " and was not used; make a new one with `yonder share`"),
                         kExitError);
    }
    struct timespec quarter = {0, 250'000'000};
    ::nanosleep(&quarter, nullptr);
  }
  auto after = post(ctx, "/v1/peers", nullptr);
  if (!after) return peer_fail(ctx, after.error());
  nlohmann::json peer = newly_paired(before, *after);
  if (ctx.json) {
    peer_print_json({{"link", id}, {"peer", peer}});
    return kExitOk;
  }
  if (!peer.is_object()) {
    std::printf("The link was used; `yonder peers` shows who paired.\n");
    return kExitOk;
  }
  std::printf("Paired with \"%s\" (node id %s)\n  check    %s  (compare with the digits `yonder pair` printed on "
              "their side: if they differ, someone may be in between; then `yonder deny %s`)\n",
              shown(peer, "name", "").c_str(), shown(peer, "node_id", "").c_str(),
              shown(peer, "check_digits", "").c_str(), shown(peer, "name", "").c_str());
  return kExitOk;
}

}  // namespace

std::string render_qr(const std::string& text) {
  QRcode* qr = QRcode_encodeString(text.c_str(), 0, QR_ECLEVEL_L, QR_MODE_8, 1);
  if (qr == nullptr) return "";
  int w = qr->width;
  auto dark = [&](int x, int y) { return x >= 0 && y >= 0 && x < w && y < w && (qr->data[y * w + x] & 1) != 0; };
  std::string out;
  // Two modules per character cell, with a 2-module quiet zone; light on dark
  // terminals and dark on light ones both scan because we draw both colours.
  for (int y = -2; y < w + 2; y += 2) {
    for (int x = -2; x < w + 2; ++x) {
      bool top = dark(x, y), bottom = dark(x, y + 1);
      out += top && bottom ? " " : top ? "\u2584" : bottom ? "\u2580" : "\u2588";
    }
    out += "\n";
  }
  QRcode_free(qr);
  return out;
}

int cmd_share(const Context& ctx, const ShareArgs& a) {
  nlohmann::json body = {{"capabilities", a.scope}, {"uses", a.uses}, {"egress", a.egress}, {"label", a.label}};
  if (a.replace_scope) body["replace_scope"] = true;
  auto expires = parse_duration_s(a.expires);
  if (!expires) return print_error(Error(expires.error()).with_context("--expires"), kExitUsage);
  body["expires_s"] = *expires;
  if (a.uses < 1) return print_error(make_error(ErrorCode::kInvalidArgument, "--uses must be 1 or more"), kExitUsage);
  if (auto st = add_limits(body, a.gpus, a.max_jobs, a.vram, a.max_time, a.memory, a.disk, a.cpus); !st) {
    return print_error(st.error(), kExitUsage);
  }
  // --wait tells who paired by what changed in the peer list.
  Result<nlohmann::json> before = a.wait ? post(ctx, "/v1/peers", nullptr) : Result<nlohmann::json>(nlohmann::json());
  if (!before) return peer_fail(ctx, before.error());
  auto r = post(ctx, "/v1/share", body);
  if (!r) return peer_fail(ctx, r.error());
  // On stderr, even with --json: the link works, but without these relays
  // (a holder pins each relay to the key the link names, so one whose key
  // the daemon does not know yet cannot go in).
  if (r->contains("relays_left_out") && (*r)["relays_left_out"].is_array()) {
    for (const auto& left : (*r)["relays_left_out"]) std::fprintf(stderr, "%s\n", shown(left, "note", "").c_str());
  }
  {
    std::vector<std::string> addresses, relays;
    for (const auto& x : r->value("addresses", nlohmann::json::array())) {
      if (x.is_string()) addresses.push_back(x.get<std::string>());
    }
    for (const auto& x : r->value("relays", nlohmann::json::array())) {
      if (x.is_string()) relays.push_back(x.get<std::string>());
    }
    std::string warning = share_reach_warning(addresses, relays);
    if (!warning.empty()) std::fprintf(stderr, "yonder: note: %s\n", warning.c_str());
  }
  if (ctx.json) {
    peer_print_json(*r);
    if (!a.wait) return kExitOk;
    std::fflush(stdout);
    return wait_for_pairing(ctx, r->value("id", ""), a.uses, *before);
  }
  std::string link = r->value("link", "");
  if (!a.no_qr) std::printf("%s\n", render_qr(link).c_str());
  std::printf("%s\n\n", link.c_str());
  std::printf("Link %s: %s\n", r->value("id", "").c_str(), shown(*r, "summary", "").c_str());
  std::printf("Valid for %s, %d pairing(s), until %s. Revoke with: yonder links revoke %s\n", a.expires.c_str(),
              a.uses, local_minute(r->value("expires_at", int64_t{0})).c_str(), r->value("id", "").c_str());
  std::printf("Whoever holds this link can pair with this node: send it privately.\n");
  if (!a.wait) return kExitOk;
  std::fflush(stdout);
  return wait_for_pairing(ctx, r->value("id", ""), a.uses, *before);
}

int cmd_links(const Context& ctx) {
  auto r = post(ctx, "/v1/links", nullptr);
  if (!r) return peer_fail(ctx, r.error());
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  const auto& links = (*r)["links"];
  if (links.empty()) {
    std::printf("No share links. Create one with `yonder share`.\n");
    return kExitOk;
  }
  std::fputs(links_table(links).c_str(), stdout);
  return kExitOk;
}

int cmd_links_revoke(const Context& ctx, const std::string& id) {
  auto r = post(ctx, "/v1/links/revoke", {{"id", id}});
  if (!r) return peer_fail(ctx, r.error());
  if (!ctx.json) std::printf("Revoked link %s: it can no longer pair anyone.\n", id.c_str());
  else peer_print_json(*r);
  return kExitOk;
}

int cmd_pair(const Context& ctx, const std::string& link) {
  auto r = post(ctx, "/v1/pair", {{"link", link}});
  if (!r) return peer_fail(ctx, r.error());
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  std::printf("Paired with \"%s\"\n  node id  %s\n  scope    %s\n  check    %s  (the provider sees the same digits "
              "for this pairing in `yonder peers` or `yonder share --wait`; compare them if you want to be sure "
              "nobody is in between)\n",
              shown(*r, "name", "").c_str(), r->value("peer", "").c_str(), shown(*r, "summary", "").c_str(),
              r->value("short_auth_string", "").c_str());
  // How its jobs run, when that is not in a container (a Slurm cluster).
  std::string notice = shown(*r, "provider_notice", "");
  if (!notice.empty()) std::printf("  note     the provider says: %s\n", notice.c_str());
  return kExitOk;
}

int cmd_peers(const Context& ctx, const std::string& which) {
  auto r = post(ctx, "/v1/peers", nullptr);
  if (!r) return peer_fail(ctx, r.error());
  if (!which.empty()) {
    // By name, or by node id or a start of it (the first group is enough).
    const nlohmann::json* found = nullptr;
    std::vector<std::string> names;
    for (const auto& p : (*r)["peers"]) {
      std::string name = shown(p, "name", ""), id = shown(p, "node_id", "");
      names.push_back(name);
      if (name == which || (which.size() >= 4 && id.rfind(which, 0) == 0)) found = &p;
    }
    if (found == nullptr) {
      std::string hint = did_you_mean(which, names);
      return print_error(make_error(ErrorCode::kNotFound, "no paired peer \"" + which + "\"" + hint +
                                                              " (`yonder peers` lists them)"),
                         kExitError);
    }
    if (ctx.json) {
      peer_print_json(*found);
    } else {
      std::fputs(peer_detail(*found).c_str(), stdout);
    }
    return kExitOk;
  }
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  const auto& peers = (*r)["peers"];
  if (peers.empty()) {
    std::printf("No peers. Pair with `yonder pair LINK`, or share with `yonder share`.\n");
    return kExitOk;
  }
  std::fputs(peers_table(peers).c_str(), stdout);
  return kExitOk;
}

int cmd_netcheck(const Context& ctx) {
  auto r = post(ctx, "/v1/netcheck", nullptr);
  if (!r) return peer_fail(ctx, r.error());
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  std::string listen = r->value("listen", "");
  if (listen.empty()) {
    std::printf("Listening   no (link.listen is empty): peers reach this node only through a relay\n");
  } else {
    std::printf("Listening   %s (port %d)\n", listen.c_str(), r->value("port", 0));
    std::string addrs;
    for (const auto& a : (*r)["addresses"]) addrs += (addrs.empty() ? "" : ", ") + a.get<std::string>();
    std::printf("Addresses   %s\n", addrs.c_str());
  }
  const auto& relays = (*r)["relays"];
  if (relays.empty()) {
    std::printf("Relays      none (a reachable paired peer offers one by default; or set link.relays, or join a "
                "group whose list names one, so peers behind NATs can reach this node)\n");
  }
  for (const auto& rl : relays) {
    std::string line = rl.value("address", "") + "  " + rl.value("state", "");
    if (rl.contains("observed_addr")) {
      line += ", sees this node at " + rl.value("observed_addr", "") + ", NAT " + rl.value("nat", "unknown") +
              " (this connection: " + rl.value("mapping", "unknown") + ")";
    }
    if (rl.contains("error")) line += " (" + rl.value("error", "") + ")";
    std::string group = rl.contains("group") && rl["group"].is_string() ? rl["group"].get<std::string>() : "";
    std::string offered_by = shown(rl, "offered_by", "");
    if (!group.empty()) {
      line += " [group " + group + (rl.value("configured", false) ? ", and link.relays]" : "]");
    } else if (!offered_by.empty()) {
      line += " [offered by peer " + offered_by + "]";
    } else if (!rl.value("configured", true)) {
      line += " [from a share link]";
    }
    std::printf("Relay       %s\n", line.c_str());
  }
  std::string nat = r->value("nat", "unknown");
  std::printf("NAT (TCP)   %s%s\n", nat.c_str(),
              nat == "port_preserving" ? ": keeps source ports"
              : nat == "symmetric"     ? ": picks new source ports"
              : nat == "none"          ? ": this node has a public address"
                                       : ": register with a relay (link.relays) to find out");
  if (r->contains("reachability") && (*r)["reachability"].is_object()) {
    // Peers' dial-back: whether this node is reachable from the internet, and who says so.
    const auto& rb = (*r)["reachability"];
    std::string state = rb.value("state", "unknown");
    std::string word = state == "reachable" ? "yes" : state == "unreachable" ? "no" : "unknown";
    std::printf("Reachable   %s: %s\n", word.c_str(), shown(rb, "why", "").c_str());
    if (rb.contains("udp") && rb["udp"].is_object()) {
      const auto& ru = rb["udp"];
      std::string udp_state = ru.value("state", "unknown");
      std::string udp_word = udp_state == "reachable" ? "yes" : udp_state == "unreachable" ? "no" : "unknown";
      std::printf("Over UDP    %s: %s\n", udp_word.c_str(), shown(ru, "why", "").c_str());
    }
  }
  if (r->contains("udp")) {
    const auto& u = (*r)["udp"];
    if (u.value("state", "") != "on") {
      std::printf("UDP         %s\n", u.value("state", "").c_str());
    } else {
      std::string line = u.value("local", "");
      if (u.contains("public")) line += ", public " + u.value("public", "");
      line += ", NAT " + u.value("nat", "unknown");
      if (u.contains("why")) line += " (" + u.value("why", "") + ")";
      std::printf("UDP         %s\n", line.c_str());
      std::printf("Punching    %s\n", u.value("punching", "unknown").c_str());
    }
  }
  if (r->contains("lan_discovery")) {
    const auto& lan = (*r)["lan_discovery"];
    std::printf("LAN         %s\n", lan.value("state", "").c_str());
  }
  if (r->contains("dht") && (*r)["dht"].is_object()) {
    const auto& d = (*r)["dht"];
    if (d.value("state", "") != "on") {
      std::printf("DHT         %s\n", d.value("state", "").c_str());
    } else {
      std::string line = "on UDP " + std::to_string(d.value("port", 0)) + ", " + std::to_string(d.value("nodes", 0)) +
                         " DHT nodes known";
      size_t n = d.value("published_for", size_t{0});
      line += n == 0 ? std::string(", nothing published (no paired peer, or no address to give)")
                     : ", where this node is published for " + std::to_string(n) + " paired peer" +
                           (n == 1 ? "" : "s") + " (sealed for each)";
      std::printf("DHT         %s\n", line.c_str());
    }
  }
  if (r->contains("relay_server") && (*r)["relay_server"].is_object()) {
    const auto& rs = (*r)["relay_server"];
    std::string offered = shown(rs, "offered", "");
    std::printf("Offering    %s\n", offered.empty() ? ("no relay: " + shown(rs, "offer_why", "")).c_str()
                                                     : ("a relay at " + offered + " to paired peers").c_str());
  }
  if (r->contains("relay_server") && (*r)["relay_server"].value("state", "off") == "on") {
    const auto& rs = (*r)["relay_server"];
    std::printf("Relaying   on %s for paired peers (%llu nodes, %llu pipes); peers set link.relays = %s@%s\n",
                rs.value("address", "").c_str(), static_cast<unsigned long long>(rs.value("nodes", 0)),
                static_cast<unsigned long long>(rs.value("pipes", 0)), rs.value("address", "").c_str(),
                rs.value("node_id", "").c_str());
    auto rate = [](double bytes_per_s) {
      return bytes_per_s <= 0 ? std::string("no limit") : format_size(static_cast<uint64_t>(bytes_per_s)) + "/s";
    };
    std::printf("            limits %s per peer, %s in all (relay.peer_rate_mb, relay.total_rate_mb); %s relayed\n",
                rate(rs.value("peer_rate", 0.0)).c_str(), rate(rs.value("total_rate", 0.0)).c_str(),
                format_size(rs.value("bytes_relayed", uint64_t{0})).c_str());
    const uint64_t cap = rs.value("monthly_cap", uint64_t{0});
    std::printf("            this month %s of %s (relay.monthly_gb)\n",
                format_size(rs.value("month_bytes", uint64_t{0})).c_str(),
                cap == 0 ? "no cap" : format_size(cap).c_str());
  }
  if (r->contains("port_mapping")) {
    const auto& pm = (*r)["port_mapping"];
    std::string line = pm.value("state", "");
    if (pm.contains("external")) line += " " + pm.value("external", "") + " via " + pm.value("protocol", "");
    if (pm.contains("reason")) line += " (" + shown(pm, "reason", "") + ")";
    std::printf("Port map    %s\n", line.c_str());
  }
  return kExitOk;
}

namespace {

// Stops every queued or running job `peer_id` has on this provider. The
// peer's sessions are already closed, so no new job can arrive meanwhile.
Result<std::vector<std::string>> stop_jobs_of(const Context& ctx, const std::string& peer_id) {
  os::HttpRequestOptions opts;
  opts.timeout = std::chrono::seconds(60);
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), "GET", "/v1/provider/jobs", "", opts);
  if (!r) return std::move(r).error();
  auto jobs = nlohmann::json::parse(r->body, nullptr, false);
  // A node that runs no jobs (executor.backend none) has none to stop.
  if (r->status == 404 || r->status == 503) return std::vector<std::string>{};
  if (r->status != 200 || !jobs.is_array()) {
    return make_error(ErrorCode::kInternal, "yonderd did not list its jobs (HTTP " + std::to_string(r->status) +
                                                "); stop them with the dashboard's Jobs tab");
  }
  std::vector<std::string> stopped;
  for (const auto& j : jobs) {
    if (!j.is_object() || j.value("peer_id", "") != peer_id) continue;
    std::string state = j.value("state", "");
    if (state != "pending" && state != "queued" && state != "starting" && state != "running") continue;
    std::string id = j.value("job_id", "");
    auto s = post(ctx, "/v1/provider/jobs/stop", {{"job_id", id}});
    if (!s) return make_error(s.error().code(), "stopping job " + id + ": " + s.error().message());
    stopped.push_back(id);
  }
  return stopped;
}

}  // namespace

int cmd_deny(const Context& ctx, const std::string& peer, bool stop_jobs) {
  auto r = post(ctx, "/v1/peers/deny", {{"peer", peer}});
  if (!r) return peer_fail(ctx, r.error());
  std::string id = r->value("peer", "");
  if (stop_jobs) {
    auto stopped = stop_jobs_of(ctx, id);
    if (!stopped) return peer_fail(ctx, stopped.error());
    (*r)["stopped_jobs"] = *stopped;
  }
  if (!ctx.json) {
    std::printf("Denied %s: its pin is removed and its live sessions are closed.\n", id.c_str());
    if (stop_jobs) std::printf("Stopped %zu of its jobs.\n", r->at("stopped_jobs").size());
  } else {
    peer_print_json(*r);
  }
  return kExitOk;
}

int cmd_allow(const Context& ctx, const std::string& peer, const std::string& capabilities, ScopeArgs args) {
  auto r = post(ctx, "/v1/peers/allow", {{"peer", peer}});
  if (!r) return peer_fail(ctx, r.error());
  std::string id = r->value("peer", "");
  if (!capabilities.empty()) {
    if (!ctx.json && r->value("was_denied", false)) std::printf("Allowed %s again.\n", id.c_str());
    args.add = capabilities;
    return cmd_scope(ctx, id, args);
  }
  if (ctx.json) {
    peer_print_json(*r);
  } else if (r->value("was_denied", false)) {
    std::printf("Allowed %s again: it is pinned with the grant it had before the deny (`yonder peers` shows it).\n",
                id.c_str());
  } else {
    std::printf("%s is not denied; nothing changed. To let it do more: yonder allow PEER run,exec,...\n", id.c_str());
  }
  return kExitOk;
}

int cmd_scope(const Context& ctx, const std::string& peer, const ScopeArgs& a) {
  nlohmann::json body = {{"peer", peer}};
  if (a.capabilities) body["capabilities"] = *a.capabilities;
  if (a.add) body["add"] = *a.add;
  if (a.remove) body["remove"] = *a.remove;
  if (a.egress) body["egress"] = *a.egress;
  if (auto st = add_limits(body, a.gpus, a.max_jobs, a.vram, a.max_time, a.memory, a.disk, a.cpus); !st) {
    return print_error(st.error(), kExitUsage);
  }
  auto r = post(ctx, "/v1/peers/scope", body);
  if (!r) return peer_fail(ctx, r.error());
  if (!ctx.json) std::printf("%s may now: %s (from its next request)\n", r->value("peer", "").c_str(), shown(*r, "summary", "").c_str());
  else peer_print_json(*r);
  return kExitOk;
}

int cmd_ping(const Context& ctx, const std::string& peer, int count, double interval_s) {
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(60000 + count * interval_s * 1000));
  auto r = post(ctx, "/v1/peers/ping", {{"peer", peer}, {"count", count}, {"interval_ms", static_cast<int>(interval_s * 1000)}},
                timeout);
  if (!r) return peer_fail(ctx, r.error());
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  for (const auto& ms : (*r)["rtt_ms"]) std::printf("reply from %s: time=%.3f ms\n", peer.c_str(), ms.get<double>());
  return kExitOk;
}

int cmd_speedtest(const Context& ctx, const std::string& peer, const std::string& bytes, int streams) {
  auto n = parse_size(bytes);
  if (!n) return print_error(n.error(), kExitUsage);
  auto r = post(ctx, "/v1/peers/speedtest", {{"peer", peer}, {"bytes", *n}, {"streams", streams}},
                std::chrono::minutes(30));
  if (!r) return peer_fail(ctx, r.error());
  if (ctx.json) {
    peer_print_json(*r);
    return kExitOk;
  }
  std::printf("sent %s over %d stream(s) in %.2f s: %.2f Gbit/s\n", format_size(r->value("bytes", uint64_t{0})).c_str(),
              streams, r->value("seconds", 0.0), r->value("gbit_s", 0.0));
  return kExitOk;
}

int cmd_call(const Context& ctx, const std::string& peer, const std::string& method, const std::string& params) {
  auto p = nlohmann::json::parse(params.empty() ? "{}" : params, nullptr, false);
  if (!p.is_object()) return print_error(make_error(ErrorCode::kInvalidArgument, "params must be a JSON object"), kExitUsage);
  auto r = post(ctx, "/v1/peers/call", {{"peer", peer}, {"method", method}, {"params", p}});
  if (!r) {
    return print_error(r.error(), r.error().code() == ErrorCode::kPermissionDenied ? kExitDenied : kExitError);
  }
  peer_print_json((*r)["result"]);
  return kExitOk;
}

}  // namespace yonder::cli
