#include "net/reach/dht_paths.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <sodium.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "discovery/pair_key.h"

namespace yonder::reach {
namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kTick{1};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// At most `max` entries that a record can carry (printable, at most 255 bytes).
std::vector<std::string> fit(std::vector<std::string> list, size_t max) {
  std::vector<std::string> out;
  for (auto& s : list) {
    if (out.size() >= max) break;
    bool ok = !s.empty() && s.size() <= 255;
    for (unsigned char c : s) ok = ok && c >= 0x21 && c <= 0x7e;
    if (ok) out.push_back(std::move(s));
  }
  return out;
}

double ms_since(Steady::time_point t) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t).count();
}

}  // namespace

struct DhtPaths::Impl : std::enable_shared_from_this<Impl> {
  struct Peer {
    std::optional<discovery::PairKey> pair;
    discovery::PublishState published;
    std::optional<discovery::LocatorLocation> location;  // where our record for it is now
    discovery::LookupState lookup;
    std::optional<int64_t> held;  // issued_at of the last record used
    std::string last_result;       // of the last lookup, for `yonder peers`
    std::vector<std::string> found_addresses;
  };

  Impl(asio::io_context& i, const Identity& id, Hooks h, discovery::DhtNode::Config c)
      : io(i), identity(id), hooks(std::move(h)), config(std::move(c)), timer(i) {}

  asio::io_context& io;
  const Identity& identity;
  Hooks hooks;
  discovery::DhtNode::Config config;
  asio::steady_timer timer;
  std::unique_ptr<discovery::DhtNode> node;
  std::map<PublicKeyBytes, Peer> peers;
  std::optional<Steady::time_point> last_published;
  size_t published_for = 0;
  std::vector<std::string> published_addresses;
  bool stopped = false;

  Status start() {
    auto n = discovery::DhtNode::start(io, config);
    if (!n) return std::move(n).error();
    node = std::move(*n);
    spdlog::info("dht: node on UDP {}, bootstrapping to {}", node->stats().port,
                 config.bootstrap.empty() ? std::string("nobody (a bootstrap node)") : [&] {
                   std::string s;
                   for (const auto& b : config.bootstrap) s += (s.empty() ? "" : ", ") + b;
                   return s;
                 }());
    tick();
    return ok_status();
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    timer.cancel();
    if (node) node->stop();
  }

  void schedule() {
    timer.expires_after(kTick);
    std::weak_ptr<Impl> weak = weak_from_this();
    timer.async_wait([weak](boost::system::error_code ec) {
      auto self = weak.lock();
      if (!ec && self && !self->stopped) self->tick();
    });
  }

  Peer* peer_entry(const PublicKeyBytes& key) {
    Peer& p = peers[key];
    if (!p.pair) {
      auto k = discovery::derive_pair_key(identity, key);
      if (!k) return nullptr;
      p.pair = *k;
    }
    return &p;
  }

  void tick() {
    auto now = Steady::now();
    int64_t unix = unix_now();
    int64_t day = discovery::locator_day(unix);
    auto addresses = fit(hooks.addresses(), discovery::kMaxLocatorAddresses);
    auto relays = fit(hooks.relays(), discovery::kMaxLocatorRelays);
    std::map<PublicKeyBytes, bool> listed;
    for (const auto& v : hooks.peers()) listed[v.key] = true;
    // Peers no longer paired (denied, unpaired): their records go.
    for (auto it = peers.begin(); it != peers.end();) {
      if (listed.count(it->first)) {
        ++it;
        continue;
      }
      if (it->second.location) node->withdraw(*it->second.location);
      it = peers.erase(it);
    }
    size_t publishing = 0;
    for (const auto& v : hooks.peers()) {
      Peer* p = peer_entry(v.key);
      if (p == nullptr) continue;
      if (!addresses.empty() || !relays.empty()) {
        if (discovery::publish_due(p->published, now, day, addresses, relays)) publish(v.key, *p, day, unix, addresses, relays);
        ++publishing;
      }
      if (!v.dial) continue;
      if (v.connected) {
        p->lookup.down_since.reset();
      } else if (!p->lookup.down_since) {
        p->lookup.down_since = now;
      }
      if (discovery::lookup_due(p->lookup, now)) look_up(v.key, v.name, *p, day);
    }
    published_for = publishing;
    schedule();
  }

  void publish(const PublicKeyBytes& key, Peer& p, int64_t day, int64_t unix, const std::vector<std::string>& addresses,
               const std::vector<std::string>& relays) {
    discovery::LocatorRecord rec;
    rec.publisher = identity.public_key();
    rec.issued_at = unix;
    rec.addresses = addresses;
    rec.relays = relays;
    discovery::LocatorNonce nonce{};
    randombytes_buf(nonce.data(), nonce.size());
    auto location = discovery::locator_location(*p.pair, identity.public_key(), day);
    if (p.location && *p.location != location) node->withdraw(*p.location);
    p.location = location;
    node->put(location, discovery::seal_locator(identity, *p.pair, rec, nonce), [name = NodeId(key).short_form()](bool ok) {
      if (!ok) spdlog::debug("dht: no DHT node stored the record for {} yet (it is announced again)", name);
    });
    p.published = {Steady::now(), day, addresses, relays};
    last_published = Steady::now();
    published_addresses = addresses;
  }

  void look_up(const PublicKeyBytes& key, const std::string& name, Peer& p, int64_t day) {
    p.lookup.running = true;
    p.lookup.last_lookup = Steady::now();
    auto pair = *p.pair;
    auto results = std::make_shared<std::vector<Bytes>>();
    auto pending = std::make_shared<int>(2);
    std::weak_ptr<Impl> weak = weak_from_this();
    for (int64_t d : {day, day - 1}) {
      node->get(discovery::locator_location(pair, key, d), [weak, key, name, pair, results, pending](std::vector<Bytes> values) {
        auto self = weak.lock();
        if (!self || self->stopped) return;
        for (auto& v : values) results->push_back(std::move(v));
        if (--*pending == 0) self->finish_lookup(key, name, pair, *results);
      });
    }
  }

  void finish_lookup(const PublicKeyBytes& key, const std::string& name, const discovery::PairKey& pair,
                     const std::vector<Bytes>& values) {
    auto it = peers.find(key);
    if (it == peers.end()) return;
    Peer& p = it->second;
    p.lookup.running = false;
    std::optional<discovery::LocatorRecord> best;
    size_t rejected = 0;
    for (const auto& v : values) {
      auto rec = discovery::open_locator(pair, key, v);
      if (!rec) {
        ++rejected;
        continue;
      }
      if (!best || rec->issued_at > best->issued_at) best = std::move(*rec);
    }
    if (!best) {
      p.last_result = values.empty() ? "no record found" : std::to_string(rejected) + " values, none the peer's";
      spdlog::info("dht: looked up {}: {}", name, p.last_result);
      return;
    }
    if (!discovery::locator_is_newer(p.held, *best, unix_now())) {
      p.last_result = "no newer record";
      return;
    }
    p.held = best->issued_at;
    p.found_addresses = best->addresses;
    p.last_result = "found";
    spdlog::info("dht: {} is at {} (its record of {} s ago)", name,
                 best->addresses.empty() ? std::string("no address, relays only") : best->addresses.front(),
                 unix_now() - best->issued_at);
    if (hooks.found) hooks.found(key, *best);
  }

  nlohmann::json status() const {
    nlohmann::json j;
    if (!node || stopped) return {{"state", "off"}};
    auto s = node->stats();
    j["state"] = "on";
    j["port"] = s.port;
    j["nodes"] = s.good + s.dubious;
    j["bootstrap"] = config.bootstrap;
    j["published_for"] = published_for;
    j["addresses"] = published_addresses;
    if (last_published) j["published_ms_ago"] = ms_since(*last_published);
    return j;
  }

  nlohmann::json peer_state(const PublicKeyBytes& key) const {
    auto it = peers.find(key);
    if (it == peers.end() || !it->second.lookup.last_lookup) return nullptr;
    const Peer& p = it->second;
    nlohmann::json j{{"looked_up_ms_ago", ms_since(*p.lookup.last_lookup)}, {"result", p.last_result}};
    if (!p.found_addresses.empty()) j["addresses"] = p.found_addresses;
    return j;
  }
};

DhtPaths::DhtPaths(asio::io_context& io, const Identity& identity, Hooks hooks, discovery::DhtNode::Config config)
    : impl_(std::make_shared<Impl>(io, identity, std::move(hooks), std::move(config))) {}

DhtPaths::~DhtPaths() {
  stop();
}

Status DhtPaths::start() {
  return impl_->start();
}

void DhtPaths::stop() {
  impl_->stop();
}

nlohmann::json DhtPaths::status() const {
  return impl_->status();
}

nlohmann::json DhtPaths::peer_state(const PublicKeyBytes& peer) const {
  return impl_->peer_state(peer);
}

}  // namespace yonder::reach
