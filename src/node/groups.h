// Groups (issue 10): named sets of nodes with a membership list signed by
// the group's owner or an admin (mesh/membership.h), kept in SQLite
// (group_store.h) and gossiped among the members over their peer links.
//
// Invites. A group invite is an ordinary share link (PeerLink::share, the
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
// Link methods (any pinned peer may call them; membership is not a grant
// and changes no scope):
//   group.membership {"membership": "<list>"} -> {"verdict": "accepted"|"stale", "membership"?: "<newer list>"}
//       The receiver judges it (judge_membership_update against the owner
//       it pinned): accepted lists are stored and pushed on to the other
//       members it is paired with; a stale one is answered with the newer
//       list it holds (so a node back from offline catches up); anything
//       else is refused (kPermissionDenied), as is a group it is not in.
//       A node that accepts a list without itself drops the group.
//   group.sync {} -> {"memberships": ["<list>", ...]}  the lists naming the caller
//   group.leave {"group"} -> {"version"}  the caller leaves: an owner/admin
//       signs the next version without it.
// Pushes go out when a list changes (to the members of the new list and to
// a member just removed) and when a session with a member comes up (both
// sides push what they hold, so a node that was offline converges).
//
// Threading: event loop only (SQLite writes here are small and rare).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/server.h"
#include "crypto/identity.h"
#include "mesh/membership.h"
#include "node/group_store.h"
#include "node/peer_link.h"

namespace yonder::node {

class Groups {
 public:
  Groups(PeerLink& link, const Identity& identity, std::string self_name, std::unique_ptr<GroupStore> store);
  // Reads the stored lists (a list that no longer decodes is dropped with a warning).
  Status load();
  // Link methods and the PeerLink hooks (redeem, pair, session).
  void register_methods();
  // GET /v1/groups, POST /v1/groups, POST /v1/groups/invite, /leave, /remove,
  // /label, GET /v1/groups/members?group=NAME.
  void add_routes(api::Router& router);

 private:
  struct Held {
    mesh::Membership list;
  };
  Result<Held*> find(const std::string& name_or_id);
  Result<mesh::PeerKey> member_key(const Held& g, const std::string& text) const;
  // Stores a list this node signed (or accepted) and pushes it.
  Status adopt(const mesh::Membership& m, const std::optional<mesh::PeerKey>& from,
               const std::optional<mesh::PeerKey>& removed);
  Result<mesh::Membership> sign_next(Result<mesh::Membership> next);
  void drop(const std::string& group_id, const std::string& why);
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

  PeerLink& link_;
  const Identity& identity_;
  mesh::PeerKey self_;
  std::string self_name_;
  std::unique_ptr<GroupStore> store_;
  std::map<std::string, Held> groups_;  // by group id
};

}  // namespace yonder::node
