#include "net/reach/link_trust.h"

#include <utility>

namespace yonder::reach {
namespace {

const char* capability_word(Capability c) {
  switch (c) {
    case Capability::kRun: return "run";
    case Capability::kExec: return "exec";
    case Capability::kForward: return "forward";
    case Capability::kFiles: return "files";
    case Capability::kMesh: return "mesh";
    case Capability::kCuda: return "cuda";
  }
  return "?";
}

}  // namespace

Status authorize_call(const std::optional<Scope>& grant, const std::string& method) {
  if (!grant) {
    return make_error(ErrorCode::kPermissionDenied, "this provider no longer accepts requests from this node");
  }
  auto cap = capability_for(method);
  if (cap && !grant->allows(*cap)) {
    return make_error(ErrorCode::kPermissionDenied,
                      std::string("not permitted: your scope on this provider does not include \"") +
                          capability_word(*cap) + "\" (it allows " + grant->capabilities_text() +
                          "); ask the provider to run `yonder allow` for you");
  }
  return ok_status();
}

link::KeyVerdict LinkTrust::classify(const PublicKeyBytes& key) {
  if (store_.find(key) != nullptr) return link::KeyVerdict::kPinned;
  if (store_.any_redeemable(unix_seconds(clock_.now()))) return link::KeyVerdict::kPairingOnly;
  return link::KeyVerdict::kReject;
}

Result<nlohmann::json> LinkTrust::redeem(const LinkIdBytes& id, const LinkSecret& secret, const PublicKeyBytes& key,
                                         const std::string& peer_name, const std::string& sas) {
  peers::PeerRecord p;
  p.key = key;
  p.name = peer_name;
  p.check_digits = sas.substr(0, 32);
  auto pinned = store_.redeem(id, secret, p, unix_seconds(clock_.now()));
  if (!pinned) return std::move(pinned).error();
  if (on_peers_changed_) on_peers_changed_();  // a new peer to declare, maybe a used-up link's token to drop
  trust_event(NodeId(key).to_string(), "trust.pair", hex_encode(id),
              {{"name", peer_name.substr(0, 64)}, {"check_digits", sas}, {"scope", pinned->grant.summary()}});
  nlohmann::json answer = {{"scope", scope_to_json(pinned->grant)}};
  if (!provider_notice_.empty()) answer["notice"] = provider_notice_;
  if (on_redeemed_) {
    nlohmann::json extra = on_redeemed_(id, key, peer_name);
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) answer.emplace(it.key(), it.value());
    }
  }
  return answer;
}

Status LinkTrust::authorize(const PublicKeyBytes& key, const std::string& method) {
  const peers::PeerRecord* p = store_.find(key);
  Status st = authorize_call(p != nullptr ? std::optional<Scope>(p->grant) : std::nullopt, method);
  if (!st && on_refused_) on_refused_(key, method, st.error());
  return st;
}

void LinkTrust::seen(const PublicKeyBytes& key) { (void)store_.touch(key, unix_seconds(clock_.now())); }

}  // namespace yonder::reach
