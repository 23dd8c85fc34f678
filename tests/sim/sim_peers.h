// A TEST DOUBLE of the node's peer link (reach::PeerLink) for simulations:
// each SimNode has a real Identity (from the seed), a real trust store
// (peers/trust_store.h, SQLite in a folder in memory) and a real LinkService, and
// implements reach::Peers over them, so node features (groups, jobs, mesh)
// run unchanged. What it leaves out is what PeerLink adds to reach a peer:
// sockets, LAN discovery, relays, punching. Instead SimNet joins two
// nodes with an in-memory carrier (net/link/memory_channel.h) that each
// LinkService adopts, and a partition is that carrier cut.
//
// Pairing: SimNet::pair pins both nodes in each other's trust stores, as a
// redeemed share link does; SimNet::redeem does the same for a share link
// the provider made through Peers::share, and runs the hooks PeerLink runs
// around a redemption (on_redeemed on the provider before pair_ok,
// on_paired on the holder after it), which is where groups hook in.
//
// Everything runs on SimNet's one io_context; seeded: the same seed gives
// the same keys, the same read splits and the same link ids.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <stdlib.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/loop_timers.h"
#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "crypto/scope.h"
#include "net/link/link_service.h"
#include "net/link/memory_channel.h"
#include "net/reach/call_deadline.h"
#include "net/reach/peers.h"
#include "peers/trust_store.h"
#include "store/migrations.h"

namespace yonder::sim {

class SimPeers final : public reach::Peers, public link::TrustPolicy {
 public:
  // `clock`: the simulation's, which the link's request budget counts by
  // (null: real time, for simulations that do not move a clock).
  SimPeers(boost::asio::io_context& io, const Identity& identity, std::string name, peers::TrustStore store,
           uint64_t seed, const LoopTimers* clock = nullptr)
      : io_(io), store_(std::move(store)), rng_(seed) {
    link::LinkConfig config;
    config.name = std::move(name);
    config.budget_clock = clock;
    service_ = std::make_unique<link::LinkService>(io, identity, *this, config);
    service_->on_established([this](const PublicKeyBytes& peer, const std::string&) {
      if (on_session_) on_session_(peer);
    });
  }

  // reach::Peers, as PeerLink answers from its trust store.
  link::LinkService& service() override { return *service_; }
  Result<Target> target(const std::string& id_or_name) const override {
    const peers::PeerRecord* p = store_.find_by_text(id_or_name);
    if (p == nullptr) return make_error(ErrorCode::kNotFound, "no paired peer \"" + id_or_name + "\" in the sim");
    return Target{p->key, p->id().to_string(), p->name, p->addresses, p->granted_to_us};
  }
  std::vector<Target> targets() const override {
    std::vector<Target> out;
    for (const auto& p : store_.peers()) {
      if (!p.denied()) out.push_back(Target{p.key, p.id().to_string(), p.name, p.addresses, p.granted_to_us});
    }
    return out;
  }
  std::optional<Scope> grant_of(const PublicKeyBytes& key) const override {
    const peers::PeerRecord* p = store_.find(key);
    if (p == nullptr) return std::nullopt;
    return p->grant;
  }
  void call_within(const Target& t, const std::string& method, const nlohmann::json& params,
                   std::chrono::milliseconds deadline, std::function<void(Result<nlohmann::json>)> done) override {
    call_with_deadline(io_, *service_, t, method, params, deadline, std::move(done));
  }
  void on_refused(RefusalHook hook) override { on_refused_ = std::move(hook); }
  // A link id from the seed, remembered with the scope it grants; the
  // answer has the fields of POST /v1/share that features read.
  Result<nlohmann::json> share(const nlohmann::json& body) override {
    LinkIdBytes id{};
    for (auto& b : id) b = static_cast<uint8_t>(rng_());
    Scope scope;
    scope.capabilities = 0xff;
    std::string id_text = hex_encode(ByteView(id.data(), id.size()));
    links_[id_text] = {id, scope};
    return nlohmann::json{{"id", id_text}, {"link", "yonder-sim-link"}, {"label", body.value("label", "")}};
  }
  void on_redeemed(RedeemedHook hook) override { on_redeemed_ = std::move(hook); }
  void on_paired(PairedHook hook) override { on_paired_ = std::move(hook); }
  void on_session(std::function<void(const PublicKeyBytes& peer)> hook) override { on_session_ = std::move(hook); }

  // link::TrustPolicy: pinned peers only (pairing goes through SimNet).
  link::KeyVerdict classify(const PublicKeyBytes& key) override {
    const peers::PeerRecord* p = store_.find(key);
    return p != nullptr && !p->denied() ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  }
  Result<nlohmann::json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&, const std::string&,
                                const std::string&) override {
    return make_error(ErrorCode::kNotFound, "the sim pairs through SimNet::redeem");
  }
  Status authorize(const PublicKeyBytes& key, const std::string& method) override {
    const peers::PeerRecord* p = store_.find(key);
    Status verdict = ok_status();
    if (p == nullptr || p->denied()) {
      verdict = make_error(ErrorCode::kPermissionDenied, "this provider no longer accepts requests from this node");
    } else if (auto cap = reach::capability_for(method); cap && !p->grant.allows(*cap)) {
      verdict = make_error(ErrorCode::kPermissionDenied, "not permitted: " + method + " is outside the scope");
    }
    if (!verdict && on_refused_) on_refused_(key, method, verdict.error());
    return verdict;
  }
  void seen(const PublicKeyBytes&) override {}

  // What SimNet does to this node.
  peers::TrustStore& store() { return store_; }
  // A share link made here (by its 32 hex id): its id and the scope it
  // grants, or nullopt (unknown or used).
  std::optional<std::pair<LinkIdBytes, Scope>> use_link(const std::string& id_text) {
    auto it = links_.find(id_text);
    if (it == links_.end()) return std::nullopt;
    auto link = it->second;
    links_.erase(it);
    return link;
  }
  nlohmann::json redeemed(const LinkIdBytes& id, const PublicKeyBytes& key, const std::string& name) {
    return on_redeemed_ ? on_redeemed_(id, key, name) : nlohmann::json::object();
  }
  void paired(const PublicKeyBytes& provider, const nlohmann::json& answer, std::function<void(nlohmann::json)> done) {
    if (!on_paired_) return done(nlohmann::json::array());
    on_paired_(provider, answer, std::move(done));
  }

 private:
  boost::asio::io_context& io_;
  peers::TrustStore store_;
  std::mt19937_64 rng_;
  std::unique_ptr<link::LinkService> service_;
  std::map<std::string, std::pair<LinkIdBytes, Scope>> links_;
  RefusalHook on_refused_;
  RedeemedHook on_redeemed_;
  PairedHook on_paired_;
  std::function<void(const PublicKeyBytes&)> on_session_;
};

struct SimNode {
  SimNode(std::string n, Identity i) : name(std::move(n)), identity(std::move(i)) {}
  std::string name;
  Identity identity;
  std::unique_ptr<SimPeers> peers;
  std::string dir;  // this node's folder
  std::string db;   // its SQLite database, migrated (features open their stores on it)
  PublicKeyBytes key() const { return identity.public_key(); }
  std::string id() const { return NodeId(identity.public_key()).to_string(); }
};

// N nodes on one event loop, joined pairwise by in-memory carriers.
class SimNet {
 public:
  // `clock`: the simulation's time, if it has one (sim time moves the
  // links' request budgets); it must outlive the network.
  explicit SimNet(uint64_t seed, const LoopTimers* clock = nullptr)
      : work_(io.get_executor()), rng_(seed), clock_(clock) {}
  ~SimNet() { stop(); }

  // Closes every node's sessions and runs what that leaves to run: call it
  // before destroying the features built on the nodes.
  void stop() {
    for (auto& n : nodes_) n->peers->service().stop();
    io.poll();
    work_.reset();
  }

  SimNode& add_node(const std::string& name) {
    uint8_t seed[32];
    for (auto& b : seed) b = static_cast<uint8_t>(rng_());
    auto identity = Identity::from_seed(ByteView(seed, sizeof seed));
    if (!identity) std::abort();
    auto node = std::make_unique<SimNode>(name, std::move(*identity));
    node->dir = dir_.path + "/" + name;
    std::filesystem::create_directories(node->dir);
    // One database per node with the daemon's schema, as its state.db.
    node->db = node->dir + "/node.db";
    auto db = store::Database::open(node->db);
    if (!db || !store::migrate(*db)) std::abort();
    auto store = peers::TrustStore::open(node->db);
    if (!store) std::abort();
    node->peers = std::make_unique<SimPeers>(io, node->identity, name, std::move(*store), rng_(), clock_);
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  // What a redeemed share link leaves behind: `provider` pins `consumer`
  // with `grant`, `consumer` pins `provider` as granting it; then a carrier.
  Status pair(SimNode& consumer, SimNode& provider, const Scope& grant) {
    YONDER_TRY(pin_both(consumer, provider, grant));
    return connect(consumer, provider);
  }

  // `holder` redeems the share link `link_id_hex` that `provider` made: the
  // pins and the carrier, then the hooks around pair_ok, as over PeerLink.
  // The answer is what the holder's POST /v1/pair shows under "groups".
  Result<nlohmann::json> redeem(SimNode& holder, SimNode& provider, const std::string& link_id_hex) {
    auto link = provider.peers->use_link(link_id_hex);
    if (!link) return make_error(ErrorCode::kNotFound, "no such share link on " + provider.name);
    const auto& [id, scope] = *link;
    YONDER_TRY(pin_both(holder, provider, scope));
    YONDER_TRY(connect(holder, provider));
    nlohmann::json answer = {{"scope", scope_to_json(scope)}, {"name", provider.name}};
    answer.update(provider.peers->redeemed(id, holder.key(), holder.name));
    std::optional<nlohmann::json> groups;
    holder.peers->paired(provider.key(), answer, [&](nlohmann::json g) { groups = std::move(g); });
    run_until([&] { return groups.has_value(); });
    if (!groups) return make_error(ErrorCode::kUnavailable, "the pairing hooks did not finish in the sim");
    return *groups;
  }

  // A carrier between two pinned nodes; ok once both sessions are established.
  Status connect(SimNode& a, SimNode& b) {
    uint64_t seed = rng_();
    auto carrier = link::memory_channel_pair(io.get_executor(), seed, 1 + seed % 4096);
    carriers_[key_of(a, b)] = carrier;
    // Shared: an end that never reports must not write to this frame later.
    auto up_a = std::make_shared<std::optional<Status>>();
    auto up_b = std::make_shared<std::optional<Status>>();
    a.peers->service().adopt_channel(carrier.a, b.key(), true, "memory", [up_a](Status s) { *up_a = s; });
    b.peers->service().adopt_channel(carrier.b, a.key(), false, "memory", [up_b](Status s) { *up_b = s; });
    run_until([&] { return up_a->has_value() && up_b->has_value(); });
    if (!*up_a || !*up_b) {
      return make_error(ErrorCode::kUnavailable, a.name + " <-> " + b.name + " did not come up (" +
                                                     (*up_a ? "" : a.name + " waits") +
                                                     (*up_b ? "" : " " + b.name + " waits") + ")");
    }
    if (!**up_a) return (*up_a)->error();
    if (!**up_b) return (*up_b)->error();
    return ok_status();
  }

  // A network partition between a and b: their carrier fails at both ends.
  void cut(SimNode& a, SimNode& b) {
    auto it = carriers_.find(key_of(a, b));
    if (it == carriers_.end()) return;
    it->second.cut();
    carriers_.erase(it);
    settle();
  }

  // Runs handlers until `done` holds or nothing is left to run. Everything
  // in the simulation runs on this one loop (the features' blocking
  // executor is the loop's own), so a few empty polls in a row mean idle.
  static constexpr int kIdlePolls = 3;
  template <class Done>
  bool run_until(Done done) {
    for (int idle = 0; idle < kIdlePolls && !done();) idle = io.poll() == 0 ? idle + 1 : 0;
    return done();
  }
  void settle() {
    run_until([] { return false; });
  }

  boost::asio::io_context io;

 private:
  // Keeps poll() from stopping the loop when nothing is pending for a
  // moment (a stopped io_context runs nothing more until restarted).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  Status pin_both(SimNode& consumer, SimNode& provider, const Scope& grant) {
    peers::PeerRecord at_provider;
    at_provider.key = consumer.key();
    at_provider.name = consumer.name;
    at_provider.grant = grant;
    YONDER_TRY(provider.peers->store().upsert(at_provider));
    peers::PeerRecord at_consumer;
    at_consumer.key = provider.key();
    at_consumer.name = provider.name;
    Scope none;
    none.capabilities = 0;  // a consumer lets its provider do nothing of its own
    if (const auto* old = consumer.peers->store().find(provider.key())) none = old->grant;
    at_consumer.grant = none;
    at_consumer.granted_to_us = grant;
    return consumer.peers->store().upsert(at_consumer);
  }
  static std::pair<PublicKeyBytes, PublicKeyBytes> key_of(const SimNode& a, const SimNode& b) {
    return a.key() < b.key() ? std::make_pair(a.key(), b.key()) : std::make_pair(b.key(), a.key());
  }

  std::mt19937_64 rng_;
  const LoopTimers* clock_;
  // The nodes' folders. In memory (/dev/shm) where there is one: each
  // node's migrations and pins are SQLite transactions, and their fsyncs on
  // a busy disk took seconds of an otherwise CPU-bound simulation.
  struct Folder {
    Folder() {
      std::error_code ec;
      std::string base = std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : "/tmp";
      std::string tmpl = base + "/yonder-sim-XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
      path = tmpl;
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
    Folder(const Folder&) = delete;
    Folder& operator=(const Folder&) = delete;
    std::string path;
  };
  Folder dir_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::map<std::pair<PublicKeyBytes, PublicKeyBytes>, link::MemoryPair> carriers_;
};

}  // namespace yonder::sim
