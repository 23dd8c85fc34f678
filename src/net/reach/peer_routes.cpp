// Local API routes of PeerLink: sharing, pairing, peers.
#include <utility>  // before Boost.Asio (GCC 12)

#include <nlohmann/json.hpp>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include <qrencode.h>

#include "base/id_prefix.h"
#include "net/reach/peer_link.h"

namespace yonder::reach {
namespace {

// These routes accept an empty body as {}.
Result<nlohmann::json> parse_body(const api::Request& req) {
  return api::parse_json_body(req.body.empty() ? std::string_view("{}") : std::string_view(req.body));
}

std::string string_field(const nlohmann::json& b, const char* name) {
  auto it = b.find(name);
  return it != b.end() && it->is_string() ? it->get<std::string>() : std::string();
}

uint64_t uint_field(const nlohmann::json& b, const char* name, uint64_t fallback) {
  auto it = b.find(name);
  return it != b.end() && it->is_number_unsigned() ? it->get<uint64_t>() : fallback;
}

// The link as a QR code in SVG (one <rect> per dark module, a 4-module
// quiet zone), for the dashboard; empty if it cannot be encoded.
std::string qr_svg(const std::string& text) {
  QRcode* qr = QRcode_encodeString(text.c_str(), 0, QR_ECLEVEL_L, QR_MODE_8, 1);
  if (qr == nullptr) return "";
  int w = qr->width;
  int size = w + 8;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + std::to_string(size) + " " +
                    std::to_string(size) + "\" shape-rendering=\"crispEdges\"><rect width=\"100%\" height=\"100%\" " +
                    "fill=\"#fff\"/><path fill=\"#000\" d=\"";
  for (int y = 0; y < w; ++y) {
    for (int x = 0; x < w; ++x) {
      if ((qr->data[y * w + x] & 1) != 0) svg += "M" + std::to_string(x + 4) + " " + std::to_string(y + 4) + "h1v1h-1z";
    }
  }
  svg += "\"/></svg>";
  QRcode_free(qr);
  return svg;
}

}  // namespace

Status apply_scope_fields(const nlohmann::json& b, Scope& s);

// A grant of more GPUs per job than this node has could never be met: the
// consumer would wait in the queue for ever. Only an explicit "gpus" is
// checked; the default (1) stays valid on a node without GPUs, where it
// means "no more than one", and CPU jobs still run.
Status PeerLink::gpus_fit(const nlohmann::json& body, const Scope& scope) const {
  if (!gpu_count_ || !body.is_object() || !body.contains("gpus")) return ok_status();
  int here = gpu_count_();
  if (scope.gpus <= here) return ok_status();
  return make_error(ErrorCode::kInvalidArgument,
                    "this node has " + std::to_string(here) + " GPU" + (here == 1 ? "" : "s") + " (`yonder gpu` lists " +
                        (here == 1 ? "it" : "them") + "), so --gpus " + std::to_string(scope.gpus) +
                        " could never be met; give --gpus " + std::to_string(here) + " or fewer");
}

Result<nlohmann::json> PeerLink::share(const nlohmann::json& body) {
  if (listen_.empty() && configured_relays_.empty() && relays_->for_share_link(4).relays.empty()) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "peers cannot reach this node: it does not listen (link.listen is empty) and has no relay "
                      "(link.relays, a relay named by one of its groups, or one a reachable paired peer offers); set "
                      "link.listen or link.relays, or pair with a reachable friend's node first");
  }
  Scope scope;  // conservative defaults: run only, 1 GPU, 2h, 1 job, no egress
  if (auto st = apply_scope_fields(body, scope); !st) return st.error();
  if (auto st = gpus_fit(body, scope); !st) return st.error();
  uint64_t expires_s = uint_field(body, "expires_s", 3600);
  uint64_t uses = uint_field(body, "uses", 1);
  if (expires_s == 0 || expires_s > 30ull * 86400) {
    return make_error(ErrorCode::kInvalidArgument, "--expires must be between 1s and 30d");
  }
  if (uses == 0 || uses > 1000) {
    return make_error(ErrorCode::kInvalidArgument, "--uses must be between 1 and 1000");
  }
  ShareLink link;
  link.provider_key = identity_.public_key();
  randombytes_buf(link.id.data(), link.id.size());
  randombytes_buf(link.secret.data(), link.secret.size());
  int64_t now = unix_seconds(clock_.now());
  link.expires_at = now + static_cast<int64_t>(expires_s);
  link.uses = static_cast<uint16_t>(uses);
  link.scope = scope;
  link.addresses = link_addresses();
  // Only relays whose key we know go in: the holder pins each relay to the
  // key the link names, so a relay with no key would be one it cannot check.
  auto for_link = relays_->for_share_link(4);
  link.relays = std::move(for_link.relays);
  nlohmann::json left_out = nlohmann::json::array();
  for (const auto& [address, why] : for_link.left_out) {
    spdlog::info("share link: {}", why);
    left_out.push_back({{"address", address}, {"note", why}});
  }
  if (listen_.empty() && link.relays.empty()) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "peers could not reach this node with this link: it does not listen (link.listen is empty) "
                      "and no relay's key is known yet; pin the relays with link.relays = HOST:PORT@NODE_ID, or "
                      "wait until `yonder netcheck` shows one registered and share again");
  }
  if (link.addresses.size() + link.relays.size() > 8) link.addresses.resize(8 - std::min<size_t>(8, link.relays.size()));
  link.provider_name = name_.substr(0, 64);
  auto text = encode_share_link(link, identity_);
  if (!text) return text.error();
  peers::LinkRecord rec;
  rec.id = link.id;
  rec.secret_hash = hash_link_secret(link.secret);
  rec.scope = scope;
  rec.created_at = now;
  rec.expires_at = link.expires_at;
  rec.uses_total = rec.uses_left = static_cast<int>(uses);
  rec.label = string_field(body, "label");
  rec.replaces_scope = body.value("replace_scope", false);
  if (auto st = store_.add_link(rec); !st) return st.error();
  spdlog::info("share link {} created: {}, {} use(s), expires in {}", link.id_text(), scope.summary(), uses,
               format_duration(expires_s));
  relay_peers_changed();  // its rendezvous token, for holders behind NATs
  trust_event("local", "trust.link_create", link.id_text(),
              {{"scope", scope.summary()},
               {"uses", uses},
               {"expires_at", link.expires_at},
               {"label", rec.label},
               {"replaces_scope", rec.replaces_scope}});
  std::vector<std::string> relay_addresses;
  for (const auto& r : link.relays) relay_addresses.push_back(r.address);
  return nlohmann::json({{"link", *text},
                         {"id", link.id_text()},
                         {"expires_at", link.expires_at},
                         {"uses", uses},
                         {"scope", scope_to_json(scope)},
                         {"summary", scope.summary()},
                         {"addresses", link.addresses},
                         {"relays", relay_addresses},
                         {"relays_left_out", left_out},
                         {"qr_svg", qr_svg(*text)}});
}

void PeerLink::add_routes(api::Router& router) {
  using api::Reply;
  using api::Request;
  using api::Response;

  router.add("POST", "/v1/share", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto made = share(*body);
    if (!made) return reply(Response::error(made.error()));
    reply(Response::json(200, *made));
  });

  router.add("GET", "/v1/links", [this](const Request&, Reply reply) {
    auto links = store_.links();
    if (!links) return reply(Response::error(links.error()));
    int64_t now = unix_seconds(clock_.now());
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& l : *links) {
      arr.push_back({{"id", l.id_text()},
                     {"state", l.state(now)},
                     {"uses_left", l.uses_left},
                     {"uses_total", l.uses_total},
                     {"created_at", l.created_at},
                     {"expires_at", l.expires_at},
                     {"scope", scope_to_json(l.scope)},
                     {"summary", l.scope.summary()},
                     {"label", l.label},
                     {"replaces_scope", l.replaces_scope}});
    }
    reply(Response::json(200, {{"links", arr}}));
  });

  router.add("POST", "/v1/links/revoke", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    // The id as `yonder links` prints it, or a unique start of it.
    static constexpr IdNoun kLink{"a share link", "share link", "`yonder links` lists them"};
    std::string given = string_field(*body, "id");
    if (auto st = check_id_arg(given, kLink); !st) return reply(Response::error(st.error()));
    auto links = store_.links();
    if (!links) return reply(Response::error(links.error()));
    struct Row {
      std::string id;
    };
    std::vector<Row> rows;
    for (const auto& l : *links) rows.push_back({l.id_text()});
    auto found = find_by_id_prefix(std::move(rows), given, kLink);
    if (!found) return reply(Response::error(found.error()));
    auto id = parse_link_id(found->id);
    if (!id) return reply(Response::error(id.error()));
    if (auto st = store_.revoke_link(*id, unix_seconds(clock_.now())); !st) return reply(Response::error(st.error()));
    spdlog::info("share link {} revoked", hex_encode(*id));
    trust_event("local", "trust.link_revoke", hex_encode(*id), nlohmann::json::object());
    relay_peers_changed();
    reply(Response::json(200, {{"ok", true}}));
  });

  router.add("POST", "/v1/pair", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto link = decode_share_link(string_field(*body, "link"));
    if (!link) return reply(Response::error(link.error()));
    if (auto st = check_link_expiry(*link, clock_.now()); !st) return reply(Response::error(st.error()));
    if (link->provider_key == identity_.public_key()) {
      return reply(Response::error(make_error(ErrorCode::kInvalidArgument,
                                              "this is a link of this very node; give it to the other person")));
    }
    ShareLink l = *link;
    service_->pair(l, [this, l, reply](Result<link::PairResult> r) {
      if (!r) return reply(Response::error(r.error()));
      peers::PeerRecord p;
      if (const auto* existing = store_.find(l.provider_key)) p = *existing;
      else p.grant.capabilities = 0;  // we grant the provider nothing unless we share with it too
      p.key = l.provider_key;
      p.name = r->provider_name.empty() ? l.provider_name : r->provider_name;
      p.addresses = l.addresses;
      // With each relay's key (keyless from a v1 link): later dials pin it.
      for (const auto& relay : l.relays) p.addresses.push_back(relay_peer_address(relay));
      auto granted = scope_from_json(r->granted);
      if (granted) p.granted_to_us = *granted;
      // The provider's word on how its jobs run (bounded; escaped when shown).
      const nlohmann::json& said = r->answer.is_object() && r->answer.contains("notice") ? r->answer["notice"]
                                                                                         : nlohmann::json();
      p.provider_notice = said.is_string() ? said.get<std::string>().substr(0, 400) : std::string();
      if (p.paired_at == 0) p.paired_at = unix_seconds(clock_.now());
      p.denied_at.reset();
      p.check_digits = r->short_auth_string.substr(0, 32);
      if (auto st = store_.upsert(p); !st) return reply(Response::error(st.error()));
      service_->keep_connected(p.key, p.addresses);
      relay_peers_changed();
      spdlog::info("paired with provider {} \"{}\"; short authentication string {}", p.id().to_string(), p.name,
                   r->short_auth_string);
      nlohmann::json answer = {{"peer", p.id().to_string()},
                               {"name", p.name},
                               {"scope", r->granted},
                               {"summary", granted ? granted->summary() : std::string("?")},
                               {"short_auth_string", r->short_auth_string},
                               {"provider_notice", p.provider_notice}};
      if (!on_paired_) return reply(Response::json(200, answer));
      // Groups: a group invite also made us a member; learn the lists now.
      on_paired_(p.key, r->answer, [answer, reply](nlohmann::json groups) mutable {
        answer["groups"] = std::move(groups);
        reply(Response::json(200, answer));
      });
    });
  });

  router.add("GET", "/v1/peers", [this](const Request&, Reply reply) {
    auto sessions = service_->sessions();
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : store_.peers()) {
      nlohmann::json j = {{"node_id", p.id().to_string()},
                          {"name", p.name},
                          {"grant", scope_to_json(p.grant)},
                          {"grant_summary", p.grant.capabilities ? p.grant.summary() : "nothing"},
                          {"granted_to_us", p.granted_to_us ? scope_to_json(*p.granted_to_us) : nlohmann::json()},
                          {"provider_notice", p.provider_notice},
                          {"paired_at", p.paired_at},
                          {"check_digits", p.check_digits},
                          {"last_seen_at", p.last_seen_at ? nlohmann::json(*p.last_seen_at) : nlohmann::json()},
                          {"denied", p.denied()},
                          {"addresses", p.addresses},
                          {"connected", false},
                          {"path", ""},
                          {"path_kind", ""},
                          {"paths", nlohmann::json::array()},
                          {"streams", 0}};
      // The path new streams take: the best session that is not draining.
      const link::SessionInfo* best = nullptr;
      for (const auto& s : sessions) {
        if (s.peer != p.key || !s.established) continue;
        j["connected"] = true;
        j["streams"] = j["streams"].get<size_t>() + s.streams;
        j["paths"].push_back({{"path", s.path}, {"draining", s.draining}, {"streams", s.streams}});
        if (!s.draining && (best == nullptr || link::path_rank(s.path) < link::path_rank(best->path))) best = &s;
      }
      if (best != nullptr) {
        j["path"] = best->path;
        j["path_kind"] = best->path.substr(0, best->path.find(' '));
        if (best->rtt) j["rtt_ms"] = std::chrono::duration<double, std::milli>(*best->rtt).count();
      }
      // Hole punching to this peer: punched, or why the link stays on the relay.
      if (punch_) {
        if (auto ps = punch_->peer_state(p.key); !ps.is_null()) j["punch"] = ps;
      }
      if (dht_) {
        if (auto ds = dht_->peer_state(p.key); !ds.is_null()) j["dht"] = ds;
      }
      arr.push_back(j);
    }
    reply(Response::json(200, {{"peers", arr}}));
  });

  // This node's reachability: where it listens, what each relay sees of it
  // (public address, NAT behaviour), and whether a port mapping exists.
  router.add("GET", "/v1/netcheck", [this](const Request&, Reply reply) {
    recheck();
    // Two questions at once, answered when both are: the UDP side (hole
    // punching) asks the relays' STUN again, and connected peers are asked
    // to dial this node back (reachability).
    auto waiting = std::make_shared<int>(punch_ ? 2 : 1);
    std::weak_ptr<bool> alive = alive_;
    auto one_done = [this, alive, waiting, reply] {
      if (--*waiting > 0) return;
      if (auto a = alive.lock(); a && *a) reply(Response::json(200, netcheck_json()));
    };
    if (punch_) punch_->recheck(one_done);
    check_reachability(one_done);
  });

  router.add("POST", "/v1/peers/deny", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto p = find_peer(string_field(*body, "peer"));
    if (!p) return reply(Response::error(p.error()));
    PublicKeyBytes key = (*p)->key;
    std::string id = (*p)->id().to_string();
    if (auto st = store_.deny(key, unix_seconds(clock_.now())); !st) return reply(Response::error(st.error()));
    // The pin is gone from memory and disk; now end its live sessions.
    service_->disconnect(key, "the provider removed this node's access");
    relay_peers_changed();
    spdlog::info("denied peer {}", id);
    trust_event("local", "trust.deny", id, nlohmann::json::object());
    reply(Response::json(200, {{"ok", true}, {"peer", id}}));
  });

  // Lifts a deny: the operator's explicit choice, so the peer's key is
  // pinned again with the grant it had (its old link stays revoked).
  router.add("POST", "/v1/peers/allow", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    std::string text = string_field(*body, "peer");
    const peers::PeerRecord* p = store_.find_any_by_text(text);
    if (p == nullptr) {
      return reply(Response::error(make_error(ErrorCode::kNotFound, "no paired or denied peer \"" + text.substr(0, 80) +
                                                                        "\"; `yonder peers` lists them")));
    }
    PublicKeyBytes key = p->key;
    bool was_denied = p->denied();
    if (auto st = store_.allow(key); !st) return reply(Response::error(st.error()));
    if (was_denied) {
      relay_peers_changed();
      spdlog::info("allowed peer {} again", NodeId(key).to_string());
      trust_event("local", "trust.allow", NodeId(key).to_string(), nlohmann::json::object());
    }
    reply(Response::json(200, {{"ok", true}, {"peer", NodeId(key).to_string()}, {"was_denied", was_denied}}));
  });

  router.add("POST", "/v1/peers/scope", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto p = find_peer(string_field(*body, "peer"));
    if (!p) return reply(Response::error(p.error()));
    Scope s = (*p)->grant;
    if (auto st = apply_scope_fields(*body, s); !st) return reply(Response::error(st.error()));
    if (auto st = gpus_fit(*body, s); !st) return reply(Response::error(st.error()));
    PublicKeyBytes key = (*p)->key;
    std::string before = (*p)->grant.summary();
    if (auto st = store_.set_grant(key, s); !st) return reply(Response::error(st.error()));
    trust_event("local", "trust.scope", NodeId(key).to_string(), {{"from", before}, {"to", s.summary()}});
    reply(Response::json(200, {{"peer", NodeId(key).to_string()}, {"scope", scope_to_json(s)}, {"summary", s.summary()}}));
  });

  router.add("POST", "/v1/peers/ping", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto p = find_peer(string_field(*body, "peer"));
    if (!p) return reply(Response::error(p.error()));
    int count = static_cast<int>(std::min<uint64_t>(uint_field(*body, "count", 4), 10000));
    auto interval = std::chrono::milliseconds(std::min<uint64_t>(uint_field(*body, "interval_ms", 200), 60000));
    auto rtts = std::make_shared<std::vector<double>>();
    service_->ping(
        (*p)->key, (*p)->addresses, std::max(count, 1), interval,
        [rtts](std::chrono::nanoseconds rtt) { rtts->push_back(std::chrono::duration<double, std::milli>(rtt).count()); },
        [rtts, reply](Status st) {
          if (!st) {
            nlohmann::json e = nlohmann::json::parse(Response::error(st.error()).body);
            e["rtt_ms"] = *rtts;
            return reply(Response::json(503, e));
          }
          reply(Response::json(200, {{"rtt_ms", *rtts}}));
        });
  });

  router.add("POST", "/v1/peers/speedtest", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto p = find_peer(string_field(*body, "peer"));
    if (!p) return reply(Response::error(p.error()));
    uint64_t bytes = std::min<uint64_t>(uint_field(*body, "bytes", 256ull << 20), 64ull << 30);
    int streams = static_cast<int>(std::min<uint64_t>(uint_field(*body, "streams", 1), 64));
    auto start = std::chrono::steady_clock::now();
    service_->speed_test((*p)->key, (*p)->addresses, bytes, streams, [reply, start](Result<uint64_t> r) {
      if (!r) return reply(Response::error(r.error()));
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      reply(Response::json(200, {{"bytes", *r}, {"seconds", s}, {"gbit_s", static_cast<double>(*r) * 8 / s / 1e9}}));
    });
  });

  router.add("POST", "/v1/peers/call", [this](const Request& req, Reply reply) {
    auto body = parse_body(req);
    if (!body) return reply(Response::error(body.error()));
    auto p = find_peer(string_field(*body, "peer"));
    if (!p) return reply(Response::error(p.error()));
    nlohmann::json params = body->contains("params") ? (*body)["params"] : nlohmann::json::object();
    service_->call((*p)->key, (*p)->addresses, string_field(*body, "method"), params,
                   [reply](Result<nlohmann::json> r) {
                     if (!r) return reply(Response::error(r.error()));
                     reply(Response::json(200, {{"result", *r}}));
                   });
  });
}

nlohmann::json PeerLink::netcheck_json() const {
  nlohmann::json relays = relay_status();
  std::string verdict = "unknown";
  std::string public_addr;
  for (const auto& r : relays) {
    if (r.value("state", "") != "registered") continue;
    public_addr = r.value("observed_addr", "");
    verdict = r.value("nat", "unknown");
    break;
  }
  nlohmann::json out = {{"node_id", identity_.node_id().to_string()},
                        {"listen", listen_},
                        {"port", service_->port()},
                        {"addresses", listen_.empty() ? std::vector<std::string>{} : advertised_addresses()},
                        {"relays", relays},
                        {"public_addr", public_addr},
                        {"nat", verdict},
                        {"lan_discovery", {{"state", lan_state()}}},
                        {"port_mapping", port_mapping_state()},
                        {"relay_server", relay_server_state()}};
  out["udp"] = punch_ ? punch_->status() : nlohmann::json{{"state", "off (link.hole_punching = false)"}};
  out["reachability"] = dial_back_ ? dial_back_->state() : nlohmann::json{{"state", "unknown"}, {"why", "not started"}};
  out["dht"] = dht_ ? dht_->status() : nlohmann::json{{"state", "off (discovery.dht is empty)"}};
  if (netcheck_extra_) netcheck_extra_(out);
  return out;
}

}  // namespace yonder::reach
