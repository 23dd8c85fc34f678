// Editing a group's membership list: the owner's or an
// admin's next version after a create, an invite redeemed, a leave, a
// removal or a label change. Pure: no I/O, no clock; the caller signs the
// result (sign_membership) and gossips it (mesh/groups/groups.h).
//
// Every edit returns an unsigned list whose version is the held one's plus
// one; the held list is not changed. The owner is always listed (role
// admin) so its labels travel with the list, and can be neither removed nor
// demoted. Labels follow the codec's rules (membership.h): keys 1..63 of
// [A-Za-z0-9._/:-], values up to 63 of the same plus '='; at most 32.
#pragma once

#include <map>
#include <string>

#include "base/error.h"
#include "mesh/core/membership.h"

namespace yonder::mesh {

// Version 1 of a new group owned by `owner` (listed, role admin, `labels`).
// `group_id`: 32 lower-case hex digits; `name`: 1..64 of [A-Za-z0-9._-].
Result<Membership> new_group(const std::string& group_id, const std::string& name, const PeerKey& owner,
                             const std::map<std::string, std::string>& labels);
// `who` joins as a member. kAlreadyExists when it is listed already.
Result<Membership> with_member(const Membership& held, const PeerKey& who,
                               const std::map<std::string, std::string>& labels = {});
// `who` is no longer listed. kNotFound when it is not; kPermissionDenied for the owner.
Result<Membership> without_member(const Membership& held, const PeerKey& who);
// Makes a listed member an admin (kAdmin) or a plain member again (kMember).
// kNotFound when `who` is not listed; kPermissionDenied for the owner (always
// an admin); kAlreadyExists when it has that role already. Only the owner
// signs such a version (mesh/groups/groups.cpp; an admin cannot promote others).
Result<Membership> with_role(const Membership& held, const PeerKey& who, MemberRole role);
// Sets (an empty value: removes) one label of a listed member.
Result<Membership> with_label(const Membership& held, const PeerKey& who, const std::string& key,
                              const std::string& value);
// Adds one of the group's relays (members register there without link.relays).
// kInvalidArgument without a key (HOST:PORT@NODE_ID: members must be able to
// check it); kAlreadyExists when its address is listed; kResourceExhausted
// past kMaxGroupRelays.
Result<Membership> with_relay(const Membership& held, const LinkRelay& relay);
// Removes the relay at `address` (HOST:PORT). kNotFound when none is listed there.
Result<Membership> without_relay(const Membership& held, const std::string& address);
// "k=v" -> (k, v), checked like a label; kInvalidArgument naming the rule.
Result<std::pair<std::string, std::string>> parse_label(const std::string& text);
// A group name: 1..64 of [A-Za-z0-9._-].
bool valid_group_name(const std::string& name);

}  // namespace yonder::mesh
