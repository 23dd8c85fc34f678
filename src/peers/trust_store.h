// Who this node trusts and how: pinned peers with their scopes, and the share
// links it has handed out. Persisted in the node's SQLite database (tables
// `peers` and `share_links`); an in-memory copy of the pins answers the TLS
// verify callback without touching the disk.
//
// Threading: owned by the daemon's event loop; every method runs there. The
// writes are small single-row transactions (well under a millisecond), and a
// pairing must be on disk before it is acknowledged, so they are synchronous.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "crypto/node_id.h"
#include "crypto/scope.h"
#include "crypto/share_link.h"
#include "store/database.h"

namespace yonder::peers {

struct PeerRecord {
  PublicKeyBytes key{};
  std::string name;
  Scope grant;  // what this node lets the peer do here (capabilities 0: nothing)
  std::optional<Scope> granted_to_us;  // what the peer lets us do there
  // What the peer, as a provider, said about how its jobs run when we paired
  // (e.g. a Slurm cluster without containers); its words, shown escaped.
  std::string provider_notice;
  std::vector<std::string> addresses;  // where to dial it ("host:port")
  int64_t paired_at = 0;
  std::optional<int64_t> last_seen_at;
  std::optional<int64_t> denied_at;
  std::string via_link_id;
  // The check digits both sides saw at the latest pairing ("" before v12 or
  // for a pin made without a link): compared aloud, they prove no one sat in
  // the middle.
  std::string check_digits;

  NodeId id() const { return NodeId(key); }
  bool denied() const { return denied_at.has_value(); }
};

struct LinkRecord {
  LinkIdBytes id{};
  Bytes secret_hash;
  Scope scope;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  int uses_total = 1;
  int uses_left = 1;
  std::optional<int64_t> revoked_at;
  std::string label;
  // The operator's choice (`share --replace-scope`): a peer paired already
  // that redeems this link gets the link's scope even where it is wider.
  bool replaces_scope = false;

  std::string id_text() const;
  // "active", "expired", "used", "revoked"
  std::string state(int64_t now) const;
};

class TrustStore {
 public:
  static Result<TrustStore> open(const std::string& db_path);

  // Peers. find() answers from memory; a denied peer is not "pinned".
  const PeerRecord* find(const PublicKeyBytes& key) const;
  const PeerRecord* find_by_text(const std::string& id_or_name) const;
  std::vector<PeerRecord> peers() const;
  Status upsert(const PeerRecord& peer);
  Status set_grant(const PublicKeyBytes& key, const Scope& scope);
  // Marks the peer denied and revokes the link it redeemed.
  Status deny(const PublicKeyBytes& key, int64_t now);
  // Lifts a deny (the operator's `yonder allow PEER`): the key is pinned
  // again with the grant it had. The link it redeemed stays revoked.
  // kNotFound for a key that never paired.
  Status allow(const PublicKeyBytes& key);
  // A peer by node id, name or short id, denied ones included (for allow).
  const PeerRecord* find_any_by_text(const std::string& text) const;
  Status touch(const PublicKeyBytes& key, int64_t now);

  // Share links.
  Status add_link(const LinkRecord& link);
  Result<std::vector<LinkRecord>> links() const;
  Status revoke_link(const LinkIdBytes& id, int64_t now);
  // True while some link has not expired (drives whether unknown keys may
  // complete a TLS handshake at all). Used and revoked links count too, so a
  // holder who replays one is told why it no longer works, not just refused.
  bool any_redeemable(int64_t now) const;

  // The pairing check and commit, in one transaction: the link must exist,
  // the secret match, and it must be unexpired, unrevoked and have uses left;
  // then one use is spent and `peer` is pinned with the link's scope, or,
  // for a peer pinned already, the narrower of its grant and the link's
  // (the link's own, wider or not, when it was made with replaces_scope).
  // A denied key is refused (kPermissionDenied) unless the link was created
  // after the deny.
  // Errors: kNotFound (no such link or wrong secret: say nothing to the
  // dialer), kFailedPrecondition with "expired"/"used"/"revoked" wording.
  Result<PeerRecord> redeem(const LinkIdBytes& id, const LinkSecret& secret, PeerRecord peer, int64_t now);

 private:
  explicit TrustStore(store::Database db) : db_(std::move(db)) {}
  Status load();

  mutable store::Database db_;
  std::map<PublicKeyBytes, PeerRecord> peers_;
};

}  // namespace yonder::peers
