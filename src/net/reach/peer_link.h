// The node's side of the peer link: owns the trust store and the LinkService,
// answers the link's policy questions through LinkTrust (who is pinned, may
// this peer call that), composes the paths beside a direct dial (relay_paths.h,
// punch_paths.h, lan_paths.h, mapped_paths.h) and the relay it serves for
// its peers (relay.listen, or offered once peers confirm this node is
// reachable: relay_offer_core.h, the link method reach.relay_offer), and
// serves the local API routes for sharing, pairing and peers:
//   POST /v1/share, GET /v1/links, POST /v1/links/revoke, POST /v1/pair,
//   GET /v1/peers, POST /v1/peers/deny, POST /v1/peers/scope,
//   POST /v1/peers/ping, POST /v1/peers/speedtest, POST /v1/peers/call
// Runs on the daemon's event loop.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "api/server.h"
#include "base/clock.h"
#include "config/config.h"
#include "crypto/identity.h"
#include "net/link/link_service.h"
#include "net/reach/dial_back.h"
#include "net/reach/lan_paths.h"
#include "net/reach/link_trust.h"
#include "net/reach/mapped_paths.h"
#include "net/reach/peers.h"
#include "net/reach/dht_paths.h"
#include "net/reach/punch_paths.h"
#include "net/reach/relay_offer_core.h"
#include "net/reach/relay_paths.h"
#include "peers/trust_store.h"

namespace boost::asio {
class io_context;
}

namespace yonder::relay {
class RelayServer;
}
namespace yonder::portmap {
class PortMapper;
}

namespace yonder::reach {

class PeerLink final : public link::TrustPolicy, public Peers {
 public:
  static Result<std::unique_ptr<PeerLink>> create(boost::asio::io_context& io, const Identity& identity,
                                                  const config::Config& cfg, const config::Paths& paths,
                                                  std::string name);
  ~PeerLink() override;

  // Starts listening (link.listen); a no-op when it is empty.
  Status start();
  void stop();
  void add_routes(api::Router& router);
  // Peers (peers.h): what node features use; event loop only.
  link::LinkService& service() override { return *service_; }
  Result<Target> target(const std::string& id_or_name) const override;
  void call_within(const Target& t, const std::string& method, const nlohmann::json& params,
                   std::chrono::milliseconds deadline, std::function<void(Result<nlohmann::json>)> done) override;
  std::vector<Target> targets() const override;
  std::optional<Scope> grant_of(const PublicKeyBytes& key) const override;
  size_t peer_count() const;
  uint16_t port() const { return service_->port(); }
  // The relays and what they see of this node (for netcheck).
  nlohmann::json relay_status() const;
  // The relays the signed lists of this node's groups name (relay, group
  // name): registered with like link.relays, and carried by share links.
  void use_group_relays(const std::vector<std::pair<LinkRelay, std::string>>& relays);
  std::string lan_state() const;
  nlohmann::json port_mapping_state() const;
  nlohmann::json relay_server_state() const;
  // netcheck looks again: LAN peers and the router are asked now.
  void recheck();
  // Asks connected peers to dial this node back (dial_back.h), keeping the
  // verdict for netcheck; `done` once they answered or timed out.
  void check_reachability(std::function<void()> done);
  // Adds the daemon's other reachability facts (LAN discovery, port
  // mapping) to GET /v1/netcheck.
  void on_netcheck(std::function<void(nlohmann::json&)> extra) { netcheck_extra_ = std::move(extra); }

  // link::TrustPolicy: LinkTrust's (link_trust.h).
  link::KeyVerdict classify(const PublicKeyBytes& key) override { return trust_.classify(key); }
  Result<nlohmann::json> redeem(const LinkIdBytes& id, const LinkSecret& secret, const PublicKeyBytes& key,
                                const std::string& peer_name, const std::string& short_auth_string) override {
    return trust_.redeem(id, secret, key, peer_name, short_auth_string);
  }
  Status authorize(const PublicKeyBytes& key, const std::string& method) override {
    return trust_.authorize(key, method);
  }
  void seen(const PublicKeyBytes& key) override { trust_.seen(key); }
  // Peers: the refusals of authorize() and the pairing hooks (peers.h).
  void on_refused(RefusalHook hook) override { trust_.on_refused(std::move(hook)); }
  Result<nlohmann::json> share(const nlohmann::json& body) override;
  void on_redeemed(RedeemedHook hook) override { trust_.on_redeemed(std::move(hook)); }
  // Changes of trust made here (a link created or revoked, a pairing with
  // its check digits, deny, allow, a scope change), for the audit log:
  // (actor: "local" or the peer's id, action "trust.*", subject, detail).
  // Event loop; the hook must not block.
  using TrustEventHook = LinkTrust::TrustEventHook;
  void on_trust_event(TrustEventHook hook) { trust_.on_trust_event(std::move(hook)); }
  // What a consumer that pairs here is told about how jobs run, with its
  // scope (a Slurm provider: no container). Empty: nothing to say.
  void set_provider_notice(std::string notice) { trust_.set_provider_notice(std::move(notice)); }
  // How many GPUs jobs here can use: `share` and `scope` refuse a grant of
  // more per job. Unset: not checked. Event loop; must not block.
  void set_gpu_count(std::function<int()> count) { gpu_count_ = std::move(count); }
  void on_paired(PairedHook hook) override { on_paired_ = std::move(hook); }
  // After the path hooks.
  void on_session(std::function<void(const PublicKeyBytes& peer)> hook) override { on_session_ = std::move(hook); }

 private:
  PeerLink(const Identity& identity, peers::TrustStore store, std::string name, std::string listen,
           std::string advertise);
  std::vector<std::string> advertised_addresses() const;
  // What a share link names for this node's link: advertised_addresses()
  // and the router's mapping of the link port (empty when it does not listen).
  std::vector<std::string> link_addresses() const;
  // A paired peer's newer locator record from the DHT: its addresses (and
  // relays) are stored and redialled.
  void on_dht_record(const PublicKeyBytes& peer, const discovery::LocatorRecord& record);
  nlohmann::json netcheck_json() const;
  Result<const peers::PeerRecord*> find_peer(const std::string& text) const;

  void relay_peers_changed();
  // Records `trust.relay_use` when a peer's link comes up over a relay it
  // did not use last time (the operator sees which relays carried whom).
  void audit_relay_use(const PublicKeyBytes& peer, const std::string& path);
  // `from_host`: the sender's IP as the relay saw it ("" when it did not say).
  void on_signal(const PublicKeyBytes& from, Bytes data, const std::string& from_host);
  std::vector<relay::Rendezvous> rendezvous_tokens();
  // Relays from among our peers (relay_offer_core.h).
  Status start_relay_server(const std::string& listen);
  // A round of dial-back when one is due (relay.offer auto), then update_offer().
  void check_reachability_if_due();
  // Starts the relay when this node is to offer it, and tells connected
  // peers when what it offers changed.
  void update_offer();
  void send_offer(const PublicKeyBytes& peer);
  void on_relay_offer(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply);
  // Registers with the offered relays choose_offered_relays picks now;
  // returns their addresses.
  std::set<std::string> choose_offered_relays_now();

  const Identity& identity_;
  peers::TrustStore store_;
  std::unique_ptr<RelayPaths> relays_;
  std::unique_ptr<PunchPaths> punch_;  // null: link.hole_punching = false
  std::string udp_listen_;
  std::chrono::milliseconds punch_keepalive_{5'000};  // link.punch_keepalive_s
  std::optional<PunchPaths::Hooks> punch_hooks_;  // until start() makes punch_
  std::unique_ptr<DhtPaths> dht_;                  // null: discovery.dht and discovery.dht_listen empty
  std::optional<discovery::DhtNode::Config> dht_config_;  // until start() makes dht_
  std::vector<RelaySpec> configured_relays_;
  boost::asio::io_context* io_ = nullptr;
  std::string relay_listen_;
  double relay_peer_rate_ = 0;   // bytes/s per peer through relay_server_ (0: no limit)
  double relay_total_rate_ = 0;  // bytes/s all peers together (0: no limit)
  size_t relay_peer_pipes_ = 16;      // relay.peer_pipes
  uint64_t relay_monthly_bytes_ = 0;  // relay.monthly_gb (0: no cap)
  std::string relay_usage_file_;      // where the relay's monthly usage is kept
  std::unique_ptr<relay::RelayServer> relay_server_;
  RelayOfferMode relay_offer_mode_ = RelayOfferMode::kAuto;  // relay.offer
  bool reach_round_running_ = false;            // an automatic dial-back round is out
  std::optional<MonoTime> last_reach_round_;    // when the last automatic round started
  bool port_mapping_wanted_ = false;            // link.port_mapping: the relay's port may be mapped too
  std::unique_ptr<portmap::PortMapper> relay_mapper_;  // the router's forward of the relay's port
  uint64_t relay_mapper_generation_ = 0;                // which mapper's news is current
  std::string relay_mapped_;                    // "IP:PORT" it forwards ("" none)
  std::string offering_;                        // the relay address offered to peers ("" none)
  std::string offer_why_;                       // why none is offered, for netcheck
  std::map<PublicKeyBytes, std::string> offers_;  // relays our peers offer us, by peer
  // The relay path each peer's link last ran over, so the audit log records
  // a change of relay, not every redial (event loop only).
  std::map<PublicKeyBytes, std::string> relay_in_use_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::string name_;
  std::string listen_;
  std::string advertise_;
  SystemClock clock_;
  LinkTrust trust_{store_, clock_};
  std::unique_ptr<link::LinkService> service_;
  std::function<int()> gpu_count_;
  Status gpus_fit(const nlohmann::json& body, const Scope& scope) const;
  void trust_event(const std::string& actor, const std::string& action, const std::string& subject,
                   nlohmann::json detail) {
    trust_.trust_event(actor, action, subject, std::move(detail));
  }
  PairedHook on_paired_;
  std::function<void(const PublicKeyBytes&)> on_session_;
  std::function<void(nlohmann::json&)> netcheck_extra_;
  // The LAN and mapped paths hold references to the store, the link service
  // and the relays, so they come after them (and go first).
  std::unique_ptr<LanPaths> lan_paths_;
  std::unique_ptr<MappedPaths> mapped_paths_;
  std::unique_ptr<DialBack> dial_back_;  // made in start(); holds a reference to the link service
};

}  // namespace yonder::reach
