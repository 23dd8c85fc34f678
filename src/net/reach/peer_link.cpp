#include "net/reach/peer_link.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>  // before Boost.Asio (GCC 12)

#include <netinet/in.h>
#include <arpa/inet.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include "base/suggest.h"
#include "net/punch/signal.h"
#include "net/reach/call_deadline.h"
#include "net/reach/local_host.h"
#include "os/files.h"
#include "os/proc_files.h"
#include "portmap/port_mapper.h"
#include "relay/monthly_allowance.h"
#include "relay/server.h"

namespace yonder::reach {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// What this node's relay carried this month, as the last run kept it:
// nothing when there is no file yet. A file that cannot be read as a usage
// record is set aside (FILE.damaged, so nothing is lost) and the count
// starts again.
relay::MonthlyUsage load_relay_usage(const std::string& file) {
  auto text = os::read_small_file(file, relay::kMaxUsageText);
  if (!text && text.error().code() == ErrorCode::kNotFound) return {};
  Result<relay::MonthlyUsage> usage =
      text ? relay::decode_monthly_usage(*text) : Result<relay::MonthlyUsage>(std::move(text).error());
  if (usage) return *usage;
  const std::string aside = file + ".damaged";
  std::error_code ec;
  std::filesystem::rename(file, aside, ec);
  spdlog::warn("relay: {}: {}; set aside as {}, and this month's count starts again", file, usage.error().message(),
               aside);
  return {};
}

}  // namespace

// Applies the optional scope fields of a request body to `s` (also used by peer_routes.cpp).
Status apply_scope_fields(const nlohmann::json& b, Scope& s) {
  auto caps = [&](const char* field) -> Result<uint8_t> {
    if (!b.contains(field)) return uint8_t{0};
    if (!b[field].is_string()) return make_error(ErrorCode::kInvalidArgument, std::string(field) + " must be a string");
    return parse_capabilities(b[field].get<std::string>());
  };
  if (b.contains("capabilities")) {
    auto c = caps("capabilities");
    if (!c) return std::move(c).error();
    s.capabilities = *c;
  }
  auto add = caps("add");
  if (!add) return std::move(add).error();
  auto remove = caps("remove");
  if (!remove) return std::move(remove).error();
  s.capabilities = static_cast<uint8_t>((s.capabilities | *add) & ~*remove);
  auto num = [&](const char* field, uint64_t max, auto& out) -> Status {
    if (!b.contains(field)) return ok_status();
    if (!b[field].is_number_unsigned() || b[field].get<uint64_t>() > max) {
      return make_error(ErrorCode::kInvalidArgument, std::string(field) + " must be a non-negative number");
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(b[field].get<uint64_t>());
    return ok_status();
  };
  YONDER_TRY(num("gpus", UINT16_MAX, s.gpus));
  YONDER_TRY(num("vram_bytes", UINT64_MAX, s.vram_bytes));
  YONDER_TRY(num("max_time_s", UINT32_MAX, s.max_time_s));
  YONDER_TRY(num("max_jobs", UINT16_MAX, s.max_jobs));
  YONDER_TRY(num("cpus_milli", UINT32_MAX, s.cpus_milli));
  YONDER_TRY(num("memory_bytes", UINT64_MAX, s.memory_bytes));
  YONDER_TRY(num("disk_bytes", UINT64_MAX, s.disk_bytes));
  if (b.contains("egress")) {
    if (!b["egress"].is_boolean()) return make_error(ErrorCode::kInvalidArgument, "egress must be true or false");
    s.egress = b["egress"].get<bool>();
  }
  return ok_status();
}

Result<std::unique_ptr<PeerLink>> PeerLink::create(boost::asio::io_context& io, const Identity& identity,
                                                   const config::Config& cfg, const config::Paths& paths,
                                                   std::string name) {
  auto store = peers::TrustStore::open(paths.database());
  if (!store) return std::move(store).error();
  std::unique_ptr<PeerLink> pl(new PeerLink(identity, std::move(*store), name, cfg.get("link.listen"),
                                            cfg.get("link.advertise")));
  link::LinkConfig lc;
  lc.name = name;
  lc.rate_burst = static_cast<double>(std::max<int64_t>(1, cfg.get_int("link.rate_burst")));
  lc.rate_per_second = static_cast<double>(std::max<int64_t>(0, cfg.get_int("link.rate_per_second")));
  lc.dead_after = std::chrono::seconds(std::clamp<int64_t>(cfg.get_int("link.dead_after_s"), 3, 3600));
  pl->service_ = std::make_unique<link::LinkService>(io, identity, *pl, lc);
  auto relays = RelayPaths::parse(cfg.get("link.relays"));
  if (!relays) return std::move(relays).error();
  PeerLink* self = pl.get();
  RelayPaths::Hooks hooks;
  hooks.peers = [self] {
    std::vector<PublicKeyBytes> keys;
    for (const auto& p : self->store_.peers()) {
      if (!p.denied()) keys.push_back(p.key);
    }
    return keys;
  };
  hooks.rendezvous = [self] { return self->rendezvous_tokens(); };
  hooks.signal = [self](const PublicKeyBytes& from, Bytes data, const std::string& from_host) {
    self->on_signal(from, std::move(data), from_host);
  };
  pl->relays_ = std::make_unique<RelayPaths>(io, identity, *pl->service_, std::move(hooks));
  pl->io_ = &io;
  pl->lan_paths_ =
      std::make_unique<LanPaths>(io, identity, *pl->service_, pl->store_, cfg.get_bool("link.lan_discovery"));
  pl->mapped_paths_ =
      std::make_unique<MappedPaths>(io, *pl->service_, *pl->relays_, cfg.get_bool("link.port_mapping"));
  pl->relay_listen_ = cfg.get("relay.listen");
  auto offer_mode = parse_relay_offer_mode(cfg.get("relay.offer"));
  if (!offer_mode) return std::move(offer_mode).error();
  pl->relay_offer_mode_ = *offer_mode;
  // Until the first verdict.
  pl->offer_why_ = decide_offer(OfferFacts{*offer_mode, {}, "", 0, "", !pl->relay_listen_.empty()}).why;
  pl->port_mapping_wanted_ = cfg.get_bool("link.port_mapping");
  constexpr double kMB = 1e6;
  pl->relay_peer_rate_ = static_cast<double>(std::max<int64_t>(cfg.get_int("relay.peer_rate_mb"), 0)) * kMB;
  pl->relay_total_rate_ = static_cast<double>(std::max<int64_t>(cfg.get_int("relay.total_rate_mb"), 0)) * kMB;
  pl->relay_peer_pipes_ = static_cast<size_t>(std::clamp<int64_t>(cfg.get_int("relay.peer_pipes"), 1, 1024));
  pl->relay_monthly_bytes_ =
      static_cast<uint64_t>(std::clamp<int64_t>(cfg.get_int("relay.monthly_gb"), 0, 1'000'000)) * 1'000'000'000ull;
  pl->relay_usage_file_ = paths.home + "/relay-usage.json";
  pl->trust_.on_peers_changed([self] { self->relay_peers_changed(); });
  pl->service_->on_established([self](const PublicKeyBytes& peer, const std::string& path) {
    // A peer reached through a relay learns of our mapped port at once.
    self->mapped_paths_->on_established(peer, path);
    self->audit_relay_use(peer, path);
    if (self->punch_) self->punch_->on_established(peer, path);
    // Relays among peers: tell the peer what we offer; see whether peers
    // can reach us (posted: the session is listed once this hook returns).
    if (!self->offering_.empty()) self->send_offer(peer);
    boost::asio::post(*self->io_, [self, alive = std::weak_ptr<bool>(self->alive_)] {
      if (auto a = alive.lock(); a && *a) self->check_reachability_if_due();
    });
    if (self->on_session_) self->on_session_(peer);
  });
  // The opt-in DHT (discovery.dht): a node with bootstrap nodes, or one
  // that serves as a bootstrap node itself (discovery.dht_listen alone).
  if (std::string dht = cfg.get("discovery.dht"), dht_listen = cfg.get("discovery.dht_listen");
      !dht.empty() || !dht_listen.empty()) {
    pl->dht_config_ = discovery::DhtNode::Config{dht_listen.empty() ? "0.0.0.0:0" : dht_listen, split_list(dht)};
  }
  if (cfg.get_bool("link.hole_punching")) {
    PunchPaths::Hooks ph;
    ph.relays = [self] { return self->relays_->addresses(); };
    ph.send_signal = [self](const PublicKeyBytes& peer, Bytes data, std::function<void(Status)> done, int rounds) {
      self->relays_->send_signal(peer, std::move(data), std::move(done), rounds);
    };
    ph.pinned = [self](const PublicKeyBytes& key) {
      const peers::PeerRecord* p = self->store_.find(key);
      return p != nullptr && !p->denied();
    };
    ph.tcp_symmetric = [self] {
      for (const auto& r : self->relay_status()) {
        if (r.value("state", "") == "registered" && r.value("nat", "") == "symmetric") return true;
      }
      return false;
    };
    ph.birthday = cfg.get_bool("link.punch_birthday");
    pl->udp_listen_ = cfg.get("link.udp_listen");
    pl->punch_keepalive_ = std::chrono::seconds(std::clamp<int64_t>(cfg.get_int("link.punch_keepalive_s"), 1, 60));
    pl->punch_hooks_ = std::move(ph);
  }
  pl->configured_relays_ = std::move(*relays);
  pl->service_->set_carrier_dialer(
      [self](const PublicKeyBytes& peer, const std::optional<ShareLink>& pairing,
             std::function<void(Result<link::Carrier>)> done) { self->relays_->dial(peer, pairing, std::move(done)); });
  return pl;
}

PeerLink::PeerLink(const Identity& identity, peers::TrustStore store, std::string name, std::string listen,
                   std::string advertise)
    : identity_(identity),
      store_(std::move(store)),
      name_(std::move(name)),
      listen_(std::move(listen)),
      advertise_(std::move(advertise)) {}

PeerLink::~PeerLink() { stop(); }

std::string PeerLink::lan_state() const { return lan_paths_->state(); }

nlohmann::json PeerLink::port_mapping_state() const { return mapped_paths_->state(); }

nlohmann::json PeerLink::relay_server_state() const {
  // What this node offers its peers (relay.offer), or why nothing.
  const std::string why = offering_.empty() ? offer_why_ : "";
  if (!relay_server_) return {{"state", "off"}, {"offered", offering_}, {"offer_why", why}};
  auto ep = relay_server_->local_endpoint();
  auto g = relay_server_->gauges();
  const auto usage = relay_server_->monthly_usage();
  const std::string month = relay::utc_month(std::chrono::system_clock::now());
  return {{"state", "on"},
          {"address", ep.address().to_string() + ":" + std::to_string(ep.port())},
          {"node_id", identity_.node_id().to_string()},
          {"nodes", g.nodes},
          {"pipes", g.pipes},
          {"peer_rate", relay_peer_rate_},    // bytes/s, 0: no limit
          {"total_rate", relay_total_rate_},  // bytes/s, 0: no limit
          {"bytes_relayed", relay_server_->metrics().bytes_relayed_total},
          {"month", month},
          {"month_bytes", usage.month == month ? usage.bytes : 0},
          {"monthly_cap", relay_monthly_bytes_},  // bytes, 0: no cap
          {"throttled", relay_server_->metrics().throttled_total},
          {"offered", offering_},
          {"offer_why", why}};
}

void PeerLink::audit_relay_use(const PublicKeyBytes& peer, const std::string& path) {
  if (path.rfind("relay", 0) != 0) {
    relay_in_use_.erase(peer);
    return;
  }
  auto [it, fresh] = relay_in_use_.try_emplace(peer, path);
  if (!fresh && it->second == path) return;
  it->second = path;
  trust_event(NodeId(peer).to_string(), "trust.relay_use", path, nlohmann::json::object());
}

void PeerLink::on_signal(const PublicKeyBytes& from, Bytes data, const std::string& from_host) {
  const peers::PeerRecord* p = store_.find(from);
  if (p == nullptr) return;  // the relay checks mutual declaration; we check the pin
  if (punch::is_punch_signal(data)) {
    if (punch_) punch_->on_signal(from, data);
    return;
  }
  mapped_paths_->on_hint(*p, data, from_host);
}

void PeerLink::recheck() {
  lan_paths_->query_now();
  mapped_paths_->recheck();
}

Status PeerLink::start() {
  // Placeholder methods for capabilities whose feature is not registered on
  // this node: authorised like the real thing, then answered honestly.
  for (const char* m : {"run.submit", "exec.open", "forward.open"}) {
    if (service_->has_method(m)) continue;
    service_->add_method(m, [m](const PublicKeyBytes&, const nlohmann::json&, link::RpcReply reply) {
      reply(make_error(ErrorCode::kFailedPrecondition, std::string(m) + " is not available on this provider yet"));
    });
  }
  service_->add_method("node.info", [this](const PublicKeyBytes&, const nlohmann::json&, link::RpcReply reply) {
    reply(nlohmann::json{{"name", name_}, {"node_id", identity_.node_id().to_string()}});
  });
  // Peers ask us to dial them back (reachability, dial_back.h); we ask them.
  dial_back_ = std::make_unique<DialBack>(
      *service_,
      [this](const Helper& h, const nlohmann::json& params, std::function<void(Result<nlohmann::json>)> done) {
        const peers::PeerRecord* p = store_.find(h.key);
        if (p == nullptr) return done(make_error(ErrorCode::kNotFound, "no longer paired"));
        call_within(Target{p->key, p->id().to_string(), p->name, p->addresses, p->granted_to_us}, "reach.dial_back",
                    params, DialBack::kAnswerWithin, std::move(done));
      },
      [] { return local_ipv4_hosts(); });
  dial_back_->register_method([this](const PublicKeyBytes& peer, const std::string& address,
                                     std::chrono::milliseconds within, std::function<void(Status)> done) {
    if (!punch_) {
      return done(make_error(ErrorCode::kFailedPrecondition, "this node has no UDP socket (link.hole_punching = false)"));
    }
    punch_->probe_udp(peer, address, within, std::move(done));
  });
  service_->add_method("reach.relay_offer",
                        [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
                          on_relay_offer(peer, params, std::move(reply));
                        });
  if (!relay_listen_.empty()) YONDER_TRY(start_relay_server(relay_listen_));
  // Our relays, and the relays of the providers we paired with.
  for (const auto& r : configured_relays_) relays_->add(r);
  for (const auto& p : store_.peers()) {
    if (!p.granted_to_us || p.denied()) continue;
    for (const auto& a : p.addresses) {
      auto relay = relay_of_peer_address(a);
      if (!relay) {
        spdlog::warn("peer {}: stored relay address \"{}\" is malformed: {}; pair again to replace it",
                     p.id().short_form(), a, relay.error().message());
      } else if (*relay && (*relay)->key) {
        relays_->add(RelaySpec{(*relay)->address, (*relay)->key, false, "", ""});
      } else if (*relay && !std::any_of(configured_relays_.begin(), configured_relays_.end(),
                                        [&](const RelaySpec& c) { return c.address == (*relay)->address; })) {
        // Stored from a v1 link, which carried no key: a relay we cannot check.
        spdlog::info("peer {}: its relay {} came without a key (an old share link); not used: pin it with "
                     "link.relays = {}@NODE_ID, or pair again with a new link",
                     p.id().short_form(), (*relay)->address, (*relay)->address);
      }
    }
  }
  // Stay connected to the providers we paired with (reconnecting with backoff).
  for (const auto& p : store_.peers()) {
    if (p.granted_to_us && !p.denied() && !p.addresses.empty()) service_->keep_connected(p.key, p.addresses);
  }
  if (punch_hooks_) {
    // Hole punching needs a relay for its signals; the socket is cheap, so
    // it is there whenever relays may appear (a share link can name one).
    uint16_t preferred = 0;
    std::string host;
    if (auto pos = listen_.rfind(':'); pos != std::string::npos) {
      preferred = static_cast<uint16_t>(std::strtoul(listen_.c_str() + pos + 1, nullptr, 10));
      host = listen_.substr(0, pos);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    }
    punch_ = std::make_unique<PunchPaths>(*io_, identity_, *service_, std::move(*punch_hooks_), udp_listen_, host,
                                          preferred, punch_keepalive_);
    punch_hooks_.reset();
    if (auto st = punch_->start(); !st) {
      if (!udp_listen_.empty()) return st;
      spdlog::warn("hole punching is off: {}", st.error().message());
      punch_.reset();
    }
  }
  if (dht_config_) {
    DhtPaths::Hooks dh;
    dh.peers = [this] {
      std::vector<DhtPaths::PeerView> out;
      auto sessions = service_->sessions();
      for (const auto& p : store_.peers()) {
        if (p.denied()) continue;
        DhtPaths::PeerView v{p.key, p.name, p.granted_to_us.has_value(), false};
        for (const auto& s : sessions) v.connected = v.connected || (s.peer == p.key && s.established);
        out.push_back(std::move(v));
      }
      return out;
    };
    dh.addresses = [this] { return link_addresses(); };
    dh.relays = [this] {
      std::vector<std::string> out;
      for (const auto& r : relays_->for_share_link(discovery::kMaxLocatorRelays).relays) out.push_back(r.text());
      return out;
    };
    dh.found = [this](const PublicKeyBytes& peer, const discovery::LocatorRecord& rec) { on_dht_record(peer, rec); };
    dht_ = std::make_unique<DhtPaths>(*io_, identity_, std::move(dh), std::move(*dht_config_));
    dht_config_.reset();
    YONDER_TRY(dht_->start());
  }
  Listening listening = listening_of(listen_);
  if (listening != Listening::kNo) {
    YONDER_TRY(service_->listen(listen_));
    spdlog::info("peer links on {} (port {})", listen_, service_->port());
  }
  // Both announce or map the port the link listens on, so after listen().
  lan_paths_->start(listening);
  mapped_paths_->start(listening);
  return ok_status();
}

void PeerLink::stop() {
  *alive_ = false;
  if (dht_) dht_->stop();
  if (relay_mapper_) relay_mapper_->stop();  // removes the relay's mapping from the router
  if (relay_server_) relay_server_->stop();
  if (lan_paths_) lan_paths_->stop();
  if (mapped_paths_) mapped_paths_->stop();  // removes the mapping from the router
  if (punch_) punch_->stop();
  if (relays_) relays_->stop();
  if (service_) service_->stop();
}

void PeerLink::use_group_relays(const std::vector<std::pair<LinkRelay, std::string>>& relays) {
  if (!relays_) return;
  std::vector<RelaySpec> specs;
  for (const auto& [relay, group] : relays) specs.push_back(RelaySpec{relay.address, relay.key, false, group, ""});
  std::set<std::string> learned;  // the relays of the providers we paired with (as start() adds them)
  for (const auto& p : store_.peers()) {
    if (!p.granted_to_us || p.denied()) continue;
    for (const auto& a : p.addresses) {
      if (auto relay = relay_of_peer_address(a); relay && *relay && (*relay)->key) learned.insert((*relay)->address);
    }
  }
  relays_->set_group_relays(specs, learned);
}

nlohmann::json PeerLink::relay_status() const { return relays_ ? relays_->status() : nlohmann::json::array(); }

void PeerLink::relay_peers_changed() {
  if (relays_) {
    relays_->refresh();
    choose_offered_relays_now();  // a denied peer's offer goes
  }
  if (lan_paths_) lan_paths_->peers_changed();
}

std::vector<relay::Rendezvous> PeerLink::rendezvous_tokens() {
  std::vector<relay::Rendezvous> out;
  auto links = store_.links();
  if (!links) return out;
  int64_t now = unix_seconds(clock_.now());
  for (const auto& l : *links) {
    if (l.state(now) != "active" || out.size() >= relay::kMaxRendezvous) continue;
    out.push_back(link_rendezvous_token(l.id, l.secret_hash));
  }
  return out;
}

size_t PeerLink::peer_count() const {
  size_t n = 0;
  for (const auto& p : store_.peers()) n += !p.denied();
  return n;
}

std::vector<std::string> PeerLink::advertised_addresses() const {
  if (!advertise_.empty()) return split_list(advertise_);
  std::string port = std::to_string(service_->port());
  std::string host = listen_.substr(0, listen_.rfind(':'));
  if (host != "0.0.0.0" && host != "[::]" && host != "::") return {host + ":" + port};
  std::vector<std::string> out;
  for (const auto& a : local_ipv4_hosts()) {
    if (a.rfind("127.", 0) != 0) out.push_back(a + ":" + port);
  }
  out.push_back("127.0.0.1:" + port);  // the same machine, last
  if (out.size() > 8) out.erase(out.begin() + 7, out.end() - 1);
  return out;
}

std::vector<std::string> PeerLink::link_addresses() const {
  std::vector<std::string> out;
  if (!listen_.empty()) out = advertised_addresses();
  if (const std::string& mapped = mapped_paths_->mapped(); !mapped.empty() && out.size() < 8) {
    // After the LAN addresses (a peer at home dials those first), before loopback.
    auto at = out.end();
    if (!out.empty() && out.back().rfind("127.", 0) == 0) --at;
    out.insert(at, mapped);
  }
  return out;
}

void PeerLink::on_dht_record(const PublicKeyBytes& peer, const discovery::LocatorRecord& rec) {
  const peers::PeerRecord* p = store_.find(peer);
  if (p == nullptr || !p->granted_to_us) return;
  // Its relays as a share link names them ("relay:HOST:PORT@NODE_ID"), each
  // pinned by its key, after its direct addresses.
  std::vector<std::string> addresses = rec.addresses;
  for (const auto& r : rec.relays) {
    auto relay = relay_of_peer_address("relay:" + r);
    if (!relay || !*relay || !(*relay)->key) continue;
    relays_->add(RelaySpec{(*relay)->address, (*relay)->key, false, "", ""});
    addresses.push_back("relay:" + r);
  }
  if (addresses.empty() || addresses == p->addresses) return;
  peers::PeerRecord updated = *p;
  updated.addresses = addresses;
  if (auto st = store_.upsert(updated); !st) {
    spdlog::warn("peer {}: cannot keep the addresses the DHT gave: {}", p->id().short_form(), st.error().message());
  }
  trust_event("dht", "trust.peer_moved", p->id().to_string(), {{"addresses", addresses}});
  service_->keep_connected(peer, addresses);
}

Status PeerLink::start_relay_server(const std::string& listen) {
  // A relay for our own peers: the key its TLS proves is ours, so peers pin
  // it with our node id. It hosts our peers; others (the peers of a peer
  // that named it in a share link) may visit to reach them, never each
  // other (relay/registry.h).
  relay::RelayConfig rc;
  rc.node_rate = relay_peer_rate_;
  rc.total_rate = relay_total_rate_;
  rc.monthly_bytes = relay_monthly_bytes_;
  rc.monthly_usage = load_relay_usage(relay_usage_file_);
  rc.on_monthly_usage = [file = relay_usage_file_](const relay::MonthlyUsage& u) {
    if (auto st = os::write_file_atomically(file, relay::encode_monthly_usage(u), 0600); !st) {
      spdlog::warn("relay: cannot keep this month's usage: {}", st.error().message());
    }
  };
  rc.registry.max_visitors = 256;
  rc.registry.max_pipes_per_node = relay_peer_pipes_;
  rc.accept_node = [this](const PublicKeyBytes& key) {
    const peers::PeerRecord* p = store_.find(key);
    return p == nullptr || !p->denied();
  };
  rc.hosts_node = [this](const PublicKeyBytes& key) {
    const peers::PeerRecord* p = store_.find(key);
    return key == identity_.public_key() || (p != nullptr && !p->denied());
  };
  auto server = std::make_unique<relay::RelayServer>(*io_, identity_, rc);
  if (auto st = server->listen(listen); !st) return Error(st.error()).with_context("relay on " + listen);
  relay_server_ = std::move(server);
  spdlog::info("relaying for paired peers on {}", listen);
  return ok_status();
}

void PeerLink::check_reachability_if_due() {
  if (!dial_back_) return;
  const MonoTime now = std::chrono::steady_clock::now();
  if (!reachability_check_due(relay_offer_mode_, listening_of(listen_) == Listening::kYes, reach_round_running_,
                              last_reach_round_, dial_back_->last(), now)) {
    return;
  }
  reach_round_running_ = true;
  last_reach_round_ = now;
  check_reachability([this, alive = std::weak_ptr<bool>(alive_)] {
    if (auto a = alive.lock(); !a || !*a) return;
    reach_round_running_ = false;
  });
}

void PeerLink::update_offer() {
  OfferFacts facts;
  facts.mode = relay_offer_mode_;
  if (dial_back_) facts.verdict = dial_back_->last();
  facts.link_mapped = mapped_paths_ ? mapped_paths_->mapped() : std::string();
  facts.relay_mapped = relay_mapped_;
  auto relay_port = [this] { return relay_server_ ? relay_server_->local_endpoint().port() : uint16_t{0}; };
  facts.relay_port = relay_port();
  facts.relay_configured = !relay_listen_.empty();
  OfferDecision d = decide_offer(facts);
  if (d.stop_relay) {
    spdlog::info("relay.offer: closing the relay this node opened for its offer ({})", d.why);
    if (relay_mapper_) relay_mapper_->stop();  // removes the relay's mapping from the router
    relay_mapper_.reset();
    relay_mapped_.clear();
    if (relay_server_) relay_server_->stop();
    relay_server_.reset();  // aborts what the graceful stop left open
  }
  if (d.run_relay && !relay_server_) {
    std::string listen = default_relay_listen(relay_listen_, listen_);
    Status st = listen.empty() ? Status(make_error(ErrorCode::kInvalidArgument, "no address to listen on"))
                               : start_relay_server(listen);
    if (!st) {
      d = {false, false, "", "not offered: the relay cannot listen: " + st.error().message() + "; set relay.listen",
           false};
      spdlog::warn("relay.offer: {}", d.why);
    } else {
      facts.relay_port = relay_port();
      d = decide_offer(facts);
    }
  }
  if (d.map_relay && !relay_mapper_ && relay_server_) {
    if (!port_mapping_wanted_) {
      d.why = "not offered: peers reach this node only through the router's mapping of the link port, and "
              "link.port_mapping is off, so the relay's port is not mapped";
    } else {
      std::weak_ptr<bool> alive = alive_;
      boost::asio::io_context* io = io_;
      uint64_t generation = ++relay_mapper_generation_;
      relay_mapper_ = std::make_unique<portmap::PortMapper>(
          relay_server_->local_endpoint().port(), portmap::MapOptions{},
          [this, alive, io, generation](const portmap::PortMapperStatus& st) {
            boost::asio::post(*io, [this, alive, st, generation] {  // the mapper's thread: to the event loop
              if (auto a = alive.lock(); !a || !*a) return;
              if (generation != relay_mapper_generation_) return;  // a mapper closed since (stop_relay)
              relay_mapped_ = st.state == portmap::MapState::kMapped && st.mapping
                                  ? st.mapping->external_ip + ":" + std::to_string(st.mapping->external_port)
                                  : std::string();
              update_offer();
            });
          });
    }
  }
  if (d.run_relay && relay_server_ && relay_server_->local_endpoint().address().is_loopback()) {
    d.address.clear();
    d.why = "not offered: the relay listens on loopback only (relay.listen = " + relay_listen_ +
            "); peers could not reach it";
  }
  offer_why_ = d.why;
  if (d.address == offering_) return;
  offering_ = d.address;
  if (!offering_.empty()) {
    spdlog::info("relay.offer: offering the relay at {} to paired peers", offering_);
  } else {
    spdlog::info("relay.offer: no longer offering a relay ({})", offer_why_);
  }
  for (const auto& s : service_->sessions()) {
    if (s.established && !s.pairing_only && !s.draining) send_offer(s.peer);
  }
  choose_offered_relays_now();  // a node that offers its own uses none of its peers'
}

void PeerLink::send_offer(const PublicKeyBytes& peer) {
  const peers::PeerRecord* p = store_.find(peer);
  if (p == nullptr || p->denied()) return;
  call_within(Target{p->key, p->id().to_string(), p->name, p->addresses, p->granted_to_us}, "reach.relay_offer",
              relay_offer_body(offering_), std::chrono::seconds(15),
              [name = p->name](Result<nlohmann::json> r) {
                if (!r) spdlog::debug("relay.offer: {} did not take the offer: {}", name, r.error().message());
              });
}

void PeerLink::on_relay_offer(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
  const peers::PeerRecord* p = store_.find(peer);
  if (p == nullptr || p->denied()) return reply(make_error(ErrorCode::kPermissionDenied, "not paired"));
  auto address = read_relay_offer(params, local_ipv4_hosts());
  if (!address) {
    spdlog::info("relay.offer: {}: {}", p->name, address.error().message());
    return reply(std::move(address).error());
  }
  if (address->empty()) {
    offers_.erase(peer);
  } else {
    offers_[peer] = *address;
  }
  const std::set<std::string> chosen = choose_offered_relays_now();
  reply(nlohmann::json{{"used", chosen.count(*address) != 0}});
}

std::set<std::string> PeerLink::choose_offered_relays_now() {
  std::map<PublicKeyBytes, std::optional<double>> rtt;
  for (const auto& s : service_->sessions()) {
    if (!s.established || !s.rtt) continue;
    double ms = std::chrono::duration<double, std::milli>(*s.rtt).count();
    auto [it, fresh] = rtt.try_emplace(s.peer, ms);
    if (!fresh && (!it->second || ms < *it->second)) it->second = ms;
  }
  std::vector<PeerOffer> offers;
  for (auto it = offers_.begin(); it != offers_.end();) {
    const peers::PeerRecord* p = store_.find(it->first);
    if (p == nullptr || p->denied()) {  // unpaired or denied since: its offer goes
      it = offers_.erase(it);
      continue;
    }
    auto r = rtt.find(it->first);
    offers.push_back(PeerOffer{it->first, p->name, it->second, r == rtt.end() ? std::nullopt : r->second});
    ++it;
  }
  std::vector<RelaySpec> specs;
  std::set<std::string> chosen;
  for (const auto& o : choose_offered_relays(std::move(offers), !offering_.empty())) {
    specs.push_back(RelaySpec{o.address, o.peer, false, "", o.name});
    chosen.insert(o.address);
  }
  relays_->set_offered_relays(specs);
  return chosen;
}

void PeerLink::check_reachability(std::function<void()> done) {
  if (!dial_back_) return done();
  std::vector<std::string> observed;
  for (const auto& r : relay_status()) {
    std::string seen = r.value("observed_addr", "");
    if (r.value("state", "") == "registered" && !seen.empty()) observed.push_back(seen.substr(0, seen.rfind(':')));
  }
  DialBack::Round round;
  round.listening = !listen_.empty();
  std::vector<std::string> advertised = advertised_addresses();
  round.candidates = dial_back_candidates(round.listening ? advertised : std::vector<std::string>{},
                                          mapped_paths_ ? mapped_paths_->mapped() : std::string(), observed,
                                          round.listening ? service_->port() : 0);
  round.udp_socket = punch_ && punch_->udp_port() != 0;
  if (round.udp_socket) {
    round.udp_candidates = udp_dial_back_candidates(advertised, punch_->udp_port(), punch_->public_udp());
  }
  std::vector<Helper> connected;
  for (const auto& s : service_->sessions()) {
    if (!s.established || s.pairing_only || s.draining) continue;
    const peers::PeerRecord* p = store_.find(s.peer);
    if (p == nullptr || p->denied()) continue;
    std::optional<double> rtt;
    if (s.rtt) rtt = std::chrono::duration<double, std::milli>(*s.rtt).count();
    connected.push_back(Helper{s.peer, p->name, s.path, rtt});
  }
  dial_back_->check(std::move(round), pick_helpers(std::move(connected)),
                    [this, alive = std::weak_ptr<bool>(alive_), done = std::move(done)] {
                      if (auto a = alive.lock(); a && *a) update_offer();
                      done();
                    });
}

Result<const peers::PeerRecord*> PeerLink::find_peer(const std::string& text) const {
  const peers::PeerRecord* p = store_.find_by_text(text);
  if (p == nullptr) {
    std::vector<std::string> names;
    for (const auto& r : store_.peers()) names.push_back(r.name);
    std::string t = text.substr(0, 80);
    return make_error(ErrorCode::kNotFound, "no paired peer \"" + t + "\" (or the name is ambiguous)" +
                                                did_you_mean(t, names) + "; `yonder peers` lists them");
  }
  return p;
}

Result<PeerLink::Target> PeerLink::target(const std::string& id_or_name) const {
  auto p = find_peer(id_or_name);
  if (!p) return std::move(p).error();
  return Target{(*p)->key, (*p)->id().to_string(), (*p)->name, (*p)->addresses,
                (*p)->granted_to_us};  // "relay:" entries included
}

void PeerLink::call_within(const Target& t, const std::string& method, const nlohmann::json& params,
                           std::chrono::milliseconds deadline, std::function<void(Result<nlohmann::json>)> done) {
  call_with_deadline(*io_, *service_, t, method, params, deadline, std::move(done));
}

std::vector<PeerLink::Target> PeerLink::targets() const {
  std::vector<Target> out;
  for (const auto& p : store_.peers()) {
    if (!p.denied()) out.push_back(Target{p.key, p.id().to_string(), p.name, p.addresses, p.granted_to_us});
  }
  return out;
}

std::optional<Scope> PeerLink::grant_of(const PublicKeyBytes& key) const {
  const peers::PeerRecord* p = store_.find(key);
  if (p == nullptr) return std::nullopt;
  return p->grant;
}

}  // namespace yonder::reach
