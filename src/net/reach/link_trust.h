// The link's trust policy (link::TrustPolicy) over this node's trust store:
// which keys may open a session (pinned peers; anyone, for pairing only,
// while a share link can still be redeemed), redeeming a share link (the
// peer is pinned with the link's scope before the pairing is answered),
// whether a pinned peer may call a method (its grant's capabilities), and
// when each was last seen. Refusals and changes of trust leave through
// hooks, for the audit log.
//
// Whether a call is allowed is authorize_call(), a pure function of the
// peer's grant and the method, so the rule is tested without a store.
//
// Event loop only (the link service calls it there).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "crypto/scope.h"
#include "net/link/link_service.h"
#include "net/reach/peers.h"
#include "peers/trust_store.h"

namespace yonder::reach {

// May a peer granted `grant` call `method`? nullopt: the peer is not pinned
// (never paired, or denied). kPermissionDenied with the sentence the peer
// is shown (which capability its scope lacks, and what to ask for).
Status authorize_call(const std::optional<Scope>& grant, const std::string& method);

class LinkTrust final : public link::TrustPolicy {
 public:
  // `store` and `clock` outlive this.
  LinkTrust(peers::TrustStore& store, const Clock& clock) : store_(store), clock_(clock) {}

  // link::TrustPolicy
  link::KeyVerdict classify(const PublicKeyBytes& key) override;
  Result<nlohmann::json> redeem(const LinkIdBytes& id, const LinkSecret& secret, const PublicKeyBytes& key,
                                const std::string& peer_name, const std::string& short_auth_string) override;
  Status authorize(const PublicKeyBytes& key, const std::string& method) override;
  void seen(const PublicKeyBytes& key) override;

  void on_refused(Peers::RefusalHook hook) { on_refused_ = std::move(hook); }
  void on_redeemed(Peers::RedeemedHook hook) { on_redeemed_ = std::move(hook); }
  // After a redeem pinned a peer (and maybe used up a link): the paths
  // declare their peers and tokens anew.
  void on_peers_changed(std::function<void()> hook) { on_peers_changed_ = std::move(hook); }
  // Changes of trust (actor: "local" or the peer's id, action "trust.*",
  // subject, detail), for the audit log; the hook must not block.
  using TrustEventHook = std::function<void(const std::string& actor, const std::string& action,
                                            const std::string& subject, nlohmann::json detail)>;
  void on_trust_event(TrustEventHook hook) { on_trust_event_ = std::move(hook); }
  void trust_event(const std::string& actor, const std::string& action, const std::string& subject,
                   nlohmann::json detail) {
    if (on_trust_event_) on_trust_event_(actor, action, subject, std::move(detail));
  }
  // What a consumer that pairs here is told about how jobs run. Empty: nothing.
  void set_provider_notice(std::string notice) { provider_notice_ = std::move(notice); }

 private:
  peers::TrustStore& store_;
  const Clock& clock_;
  Peers::RefusalHook on_refused_;
  Peers::RedeemedHook on_redeemed_;
  std::function<void()> on_peers_changed_;
  TrustEventHook on_trust_event_;
  std::string provider_notice_;
};

}  // namespace yonder::reach
