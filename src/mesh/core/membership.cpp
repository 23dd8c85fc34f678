#include "mesh/core/membership.h"

#include <algorithm>
#include <set>

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

using namespace detail;
constexpr std::string_view kMembershipWhat = "group membership";
constexpr std::string_view kMembershipLabel = "yonder-mesh-membership-v1";

bool hex32(std::string_view s) {
  if (s.size() != 32) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

json unsigned_json(const Membership& m) {
  json members = json::array();
  for (const auto& mem : m.members) {
    members.push_back(json{{"id", peer_text(mem.id)},
                           {"role", mem.role == MemberRole::kAdmin ? "admin" : "member"},
                           {"labels", labels_json(mem.labels)}});
  }
  json out{{"group", m.group_id},           {"name", m.name},
           {"version", m.version},          {"owner", peer_text(m.owner)},
           {"members", std::move(members)}, {"signer", peer_text(m.signer)}};
  if (!m.relays.empty()) {
    json relays = json::array();
    for (const auto& r : m.relays) relays.push_back(r.text());
    out["relays"] = std::move(relays);
  }
  return out;
}

}  // namespace

Result<Membership> decode_membership(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxMembershipBytes, kMembershipWhat));
  Membership m;
  MESH_GET(group, get_string(j, "group", 32, 32, kMembershipWhat));
  if (!hex32(group)) return bad(kMembershipWhat, "\"group\" must be 32 lower-case hex digits");
  m.group_id = std::move(group);
  MESH_GET(name, get_string(j, "name", 1, 64, kMembershipWhat));
  m.name = std::move(name);
  MESH_GET(version, get_uint(j, "version", uint64_t{1} << 53, kMembershipWhat));
  if (version == 0) return bad(kMembershipWhat, "\"version\" must be at least 1");
  m.version = version;
  MESH_GET(owner, get_peer(j, "owner", kMembershipWhat));
  m.owner = owner;
  const json* members = find(j, "members");
  if (members == nullptr || !members->is_array() || members->size() > kMaxGroupMembers) {
    return bad(kMembershipWhat, "\"members\" must be an array of at most 1024 members");
  }
  std::set<PeerKey> seen;
  for (const auto& item : *members) {
    if (!item.is_object()) return bad(kMembershipWhat, "a member must be an object");
    Member mem;
    MESH_GET(id, get_peer(item, "id", kMembershipWhat));
    if (!seen.insert(id).second) return bad(kMembershipWhat, "a member is listed twice");
    mem.id = id;
    MESH_GET(role, get_string(item, "role", 1, 16, kMembershipWhat));
    if (role == "admin") {
      mem.role = MemberRole::kAdmin;
    } else if (role == "member") {
      mem.role = MemberRole::kMember;
    } else {
      return bad(kMembershipWhat, "\"role\" must be \"member\" or \"admin\"");
    }
    MESH_GET(labels, get_labels(item, "labels", kMembershipWhat));
    mem.labels = std::move(labels);
    m.members.push_back(std::move(mem));
  }
  if (const json* relays = find(j, "relays"); relays != nullptr) {
    if (!relays->is_array() || relays->empty() || relays->size() > kMaxGroupRelays) {
      return bad(kMembershipWhat, "\"relays\" must be an array of 1 to 4 relays");
    }
    std::set<std::string> addresses;
    for (const auto& item : *relays) {
      if (!item.is_string() || item.get_ref<const std::string&>().size() > 300) {
        return bad(kMembershipWhat, "a relay must be a string \"HOST:PORT@NODE_ID\"");
      }
      auto relay = parse_link_relay(item.get_ref<const std::string&>());
      if (!relay) return bad(kMembershipWhat, "a relay: " + relay.error().message());
      if (!relay->key) return bad(kMembershipWhat, "a relay must name its key (HOST:PORT@NODE_ID)");
      if (!addresses.insert(relay->address).second) return bad(kMembershipWhat, "a relay is listed twice");
      m.relays.push_back(std::move(*relay));
    }
  }
  MESH_GET(signer, get_peer(j, "signer", kMembershipWhat));
  m.signer = signer;
  MESH_GET(sig, get_signature(j, "sig", kMembershipWhat));
  m.signature = std::move(sig);
  return m;
}

std::string encode_membership(const Membership& m) {
  json j = unsigned_json(m);
  j["sig"] = base64_encode(m.signature);
  return j.dump();
}

Bytes membership_signing_bytes(const Membership& m) {
  return signing_bytes(kMembershipLabel, unsigned_json(m));
}

void sign_membership(Membership& m, const Identity& signer) {
  m.signer = signer.public_key();
  m.signature = signer.sign(membership_signing_bytes(m));
}

bool membership_signature_valid(const Membership& m) {
  return verify_signature(m.signer, membership_signing_bytes(m), m.signature);
}

bool is_member(const Membership& m, const PeerKey& peer) {
  if (peer == m.owner) return true;
  return std::any_of(m.members.begin(), m.members.end(), [&](const Member& x) { return x.id == peer; });
}

bool is_admin(const Membership& m, const PeerKey& peer) {
  if (peer == m.owner) return true;
  return std::any_of(m.members.begin(), m.members.end(),
                     [&](const Member& x) { return x.id == peer && x.role == MemberRole::kAdmin; });
}

MembershipVerdict judge_membership_update(const Membership* held, const PeerKey& pinned_owner,
                                          const Membership& incoming) {
  if (incoming.owner != pinned_owner) return MembershipVerdict::kRejected;
  if (held != nullptr && incoming.group_id != held->group_id) return MembershipVerdict::kRejected;
  if (held != nullptr) {
    if (incoming.version < held->version) return MembershipVerdict::kStale;
    // Same version: only a competing list with larger signature bytes wins.
    if (incoming.version == held->version && !(held->signature < incoming.signature)) {
      return MembershipVerdict::kStale;
    }
  }
  bool authorised = incoming.signer == pinned_owner || (held != nullptr && is_admin(*held, incoming.signer));
  if (!authorised) return MembershipVerdict::kRejected;
  // Checked last: the most expensive step.
  if (!membership_signature_valid(incoming)) return MembershipVerdict::kRejected;
  return MembershipVerdict::kAccept;
}

}  // namespace yonder::mesh
