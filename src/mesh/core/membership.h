// Group membership: the list of who is in a group, versioned and signed by
// the group's owner or one of its admins, gossiped among the members
// (gossip.h). A node keeps the newest version it can authorise; removal is
// absence from a newer list.
//
// Authorisation (judge_membership_update):
//  - the owner key is fixed for the group (pinned from the invite link);
//  - the first version a node accepts must be signed by the owner;
//  - a newer version must be signed by the owner or by an admin of the
//    version the node already holds (an admin cannot promote itself into a
//    group it is not admin of);
//  - two different lists with the same version (two admins at once): the
//    one whose signature bytes compare larger wins, on every node, so
//    gossip converges.
//
// Wire form: one JSON object, at most kMaxMembershipBytes:
//   {"group": "<32 hex>", "name", "version", "owner": "<node id>",
//    "members": [{"id", "role": "member"|"admin", "labels": {k: v}}],
//    "relays"?: ["HOST:PORT@NODE_ID", ...],
//    "signer": "<node id>", "sig": "<base64>"}
// "relays" (the group's own relays: a lab's server, a club's VPS running
// yonder-relay) is present only when the group has some, so a list without
// relays signs exactly as before relays existed. Each names the relay's key:
// a member registers only with the relay that proves it.
// Signed over "yonder-mesh-membership-v1\n" + canonical JSON without "sig".
// The admins are the members with role "admin"; the owner need not be
// listed. Untrusted input: fuzz/membership_fuzz.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "crypto/share_link.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

inline constexpr size_t kMaxMembershipBytes = 512 * 1024;
inline constexpr size_t kMaxGroupMembers = 1024;
// A share link carries at most 4 relays; a group list as many.
inline constexpr size_t kMaxGroupRelays = 4;

enum class MemberRole { kMember, kAdmin };

struct Member {
  PeerKey id{};
  MemberRole role = MemberRole::kMember;
  std::map<std::string, std::string> labels;  // "gpu" -> "rtx4090"
  bool operator==(const Member&) const = default;
};

struct Membership {
  std::string group_id;  // 32 lower-case hex digits (16 random bytes)
  std::string name;      // 1..64 printable
  uint64_t version = 0;  // >= 1, grows with every change
  PeerKey owner{};
  std::vector<Member> members;  // unique ids, order kept
  std::vector<LinkRelay> relays;  // each with its key, unique addresses, at most kMaxGroupRelays
  PeerKey signer{};
  Bytes signature;

  bool operator==(const Membership&) const = default;
};

Result<Membership> decode_membership(std::string_view text);
std::string encode_membership(const Membership& m);
Bytes membership_signing_bytes(const Membership& m);
// Sets m.signer to the identity's key and signs.
void sign_membership(Membership& m, const Identity& signer);
bool membership_signature_valid(const Membership& m);

bool is_member(const Membership& m, const PeerKey& peer);  // the owner counts
bool is_admin(const Membership& m, const PeerKey& peer);   // the owner counts

enum class MembershipVerdict {
  kAccept,    // replaces what the node holds (or is the first)
  kStale,     // not newer than what it holds: keep the held one
  kRejected,  // bad signature, unauthorised signer, other group or owner
};

// Pure: what a node holding `held` (none yet: nullptr) and trusting
// `pinned_owner` does with `incoming`.
MembershipVerdict judge_membership_update(const Membership* held, const PeerKey& pinned_owner,
                                          const Membership& incoming);

}  // namespace yonder::mesh
