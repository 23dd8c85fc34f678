// Groups: named sets of nodes with a membership list signed by
// the group's owner or an admin (mesh/core/membership.h), kept in SQLite
// (group_store.h) and gossiped among the members over their peer links.
//
// Invites. A group invite is an ordinary share link (reach::Peers::share, the
// scope given to `yonder group invite`) whose id this node remembers as an
// invite into the group (table group_invites). No new link format: the
// holder redeems it with `yonder pair` or `yonder group join` like any
// link. When it is redeemed, the inviter (owner or admin) signs the next
// version with the holder in it, stores it, and pushes it to the members;
// the pairing answer (pair_ok) goes out after that, with "groups": [ids]
// added, so the holder knows the link was an invite (an ordinary pairing
// costs no extra request). The holder then asks the inviter
// (`group.sync`) for the lists that name it and accepts a group it does not
// hold only there: signed by the list's owner, naming the holder, sent by
// the owner or an admin it has just paired with. That first list pins the
// owner key (the holder trusts the inviter it chose to pair with).
//
// Admins. The owner alone promotes and demotes (`yonder group admin`, a new
// version with the member's role). An admin's list is accepted by a node
// that already holds one naming it admin; a newcomer an admin invited holds
// none, so the inviter sends, with the list, its proof: an owner-signed list
// that names it admin (kept from the promotion, or asked of the owner with
// `group.proof` when a session with it comes up). The newcomer accepts the
// admin-signed list only with a valid proof for its signer.
//
// Link methods (any pinned peer may call them; membership is not a grant
// and changes no scope):
//   group.membership {"membership": "<list>"} -> {"verdict": "accepted"|"stale", "membership"?: "<newer list>"}
//       The receiver judges it (judge_membership_update against the owner
//       it pinned): accepted lists are stored and pushed on to the other
//       members it is paired with; a stale one is answered with the newer
//       list it holds (so a node back from offline catches up); anything
//       else is refused (kPermissionDenied), as is a group it is not in.
//       A node that accepts a list without itself drops the group.
//   group.sync {} -> {"memberships": ["<list>", ...], "proofs": {group id: "<owner-signed list>"}}
//       the lists naming the caller, and this node's admin proofs
//   group.proof {"group"} -> {"membership": "<list>"}  (owner only) the held
//       list signed again by the owner, for a caller that is an admin in it:
//       never adopted or pushed (same version and contents), only shown.
//   group.leave {"group"} -> {"version"}  the caller leaves: an owner/admin
//       signs the next version without it.
//
// Relays. A list may name the group's own relays (`yonder group relay`, by
// the owner or an admin; each HOST:PORT@NODE_ID, so members pin its key).
// Every member registers with them without configuring link.relays, puts
// them in the share links it makes, and so reaches any peer registered
// there: relays_changed() tells the link whenever the set changes. A relay
// sees only the members' ciphertext; a hostile admin could name one that
// drops it (members then fall back to their other paths), not one that reads it.
// Pushes go out when a list changes (to the members of the new list and to
// the members of the previous one it no longer names) and when a session with a member comes up (both
// sides push what they hold, so a node that was offline converges).
//
// Threading: event loop only (SQLite writes here are small and rare).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "api/server.h"
#include "base/hook.h"
#include "crypto/identity.h"
#include "mesh/core/membership.h"
#include "mesh/groups/group_store.h"
#include "net/reach/peers.h"

namespace yonder::mesh {

class Groups : public api::Module {
 public:
  std::string_view module_name() const override { return "groups"; }
  Groups(reach::Peers& link, const Identity& identity, std::string self_name, std::unique_ptr<GroupStore> store);
  // Reads the stored lists (a list that no longer decodes is dropped with a warning).
  Status load();
  Status start() override { return load(); }
  // Link methods and the pairing hooks of reach::Peers (redeem, pair, session).
  void register_methods() override;
  // GET /v1/groups, POST /v1/groups, POST /v1/groups/invite, /leave, /remove,
  // /label, /admin, /relay, GET /v1/groups/members?group=NAME.
  void add_routes(api::Router& router) override;

  // For placement (`run --mesh --group G`): the list this node holds for the
  // group named (or id-prefixed) `name_or_id`; kNotFound, naming `yonder
  // group list`, when this node is in no such group.
  Result<mesh::Membership> membership(const std::string& name_or_id) const;
  // Every list this node holds (one per group it is in).
  std::vector<mesh::Membership> memberships() const;
  // Called (event loop) when this node, as owner or admin, added a member
  // through a redeemed invite (the known-answer benchmark of newcomers).
  Hook<mesh::PeerKey>& member_added() { return member_added_; }
  // The relays of every group this node holds, each with its group's name.
  struct GroupRelay {
    LinkRelay relay;
    std::string group;
  };
  std::vector<GroupRelay> relays() const;
  // Fired (event loop) with relays() after load and whenever it changes.
  Hook<std::vector<GroupRelay>>& relays_changed() { return relays_changed_; }

 private:
  struct Held {
    mesh::Membership list;
    // An owner-signed list naming this node admin (none when it is no admin,
    // or is the owner): shown to newcomers this node invites.
    std::optional<mesh::Membership> proof;
  };
  // Keeps h.list as the proof when it is one; drops the proof when h.list
  // no longer names this node admin.
  void note_proof(Held& h) const;
  // Asks the owner for a proof (group.proof) if this node is an admin without one.
  void ask_proof(const std::string& group_id);
  Result<const Held*> find(const std::string& name_or_id) const;
  // What a route that edits a group asks, once this node may edit it (its
  // owner or an admin): the request's body and the group it names.
  struct AdminEdit {
    nlohmann::json body;
    const Held* group = nullptr;
  };
  Result<AdminEdit> admin_edit(const std::string& request_body) const;
  Result<mesh::PeerKey> member_key(const Held& g, const std::string& text) const;
  // Stores a list this node signed (or accepted) and pushes it.
  Status adopt(const mesh::Membership& m, const std::optional<mesh::PeerKey>& from,
               const std::optional<mesh::PeerKey>& removed);
  Result<mesh::Membership> sign_next(Result<mesh::Membership> next);
  void drop(const std::string& group_id, const std::string& why);
  // Fires relays_changed when relays() is no longer what it last told.
  void tell_relays();
  void push(const mesh::Membership& m, const mesh::PeerKey& to);
  // What to do with a list from `from`; the RPC's answer.
  Result<nlohmann::json> receive(const mesh::PeerKey& from, const std::string& text);
  // An invite redeemed: adds the holder; {"groups": [id]} for the pairing answer.
  nlohmann::json on_redeemed(const LinkIdBytes& id, const PublicKeyBytes& key);
  // After pairing: asks for the lists (group.sync) only when the answer says the link was an invite.
  void on_paired(const PublicKeyBytes& provider, const nlohmann::json& answer,
                 std::function<void(nlohmann::json)> done);
  void on_session(const PublicKeyBytes& peer);
  nlohmann::json summary(const Held& g) const;
  nlohmann::json members_json(const Held& g) const;
  bool paired(const mesh::PeerKey& key) const;

  reach::Peers& link_;
  const Identity& identity_;
  mesh::PeerKey self_;
  std::string self_name_;
  std::unique_ptr<GroupStore> store_;
  std::map<std::string, Held> groups_;  // by group id
  Hook<mesh::PeerKey> member_added_;
  Hook<std::vector<GroupRelay>> relays_changed_;
  std::optional<std::vector<std::string>> relays_told_;  // relays() as text, as last fired
};

}  // namespace yonder::mesh
