#include "mesh/core/group_edit.h"

#include <algorithm>

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

Membership next_of(const Membership& held) {
  Membership m = held;
  m.version = held.version + 1;
  m.signer = PeerKey{};
  m.signature.clear();
  return m;
}

Status check_label(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > 63 || !detail::token_chars(key, false)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "label key \"" + key.substr(0, 64) + "\" must be 1..63 of A-Z a-z 0-9 . _ / : -");
  }
  if (value.size() > 63 || !detail::token_chars(value, true)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "label value \"" + value.substr(0, 64) + "\" must be at most 63 of A-Z a-z 0-9 . _ / : = -");
  }
  return ok_status();
}

Status check_labels(const std::map<std::string, std::string>& labels) {
  if (labels.size() > detail::kMaxLabels) {
    return make_error(ErrorCode::kInvalidArgument, "a member has at most 32 labels");
  }
  for (const auto& [k, v] : labels) YONDER_TRY(check_label(k, v));
  return ok_status();
}

}  // namespace

bool valid_group_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

Result<std::pair<std::string, std::string>> parse_label(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument, "label \"" + text.substr(0, 64) + "\" must be key=value");
  }
  std::string k = text.substr(0, eq), v = text.substr(eq + 1);
  YONDER_TRY(check_label(k, v));
  return std::make_pair(k, v);
}

Result<Membership> new_group(const std::string& group_id, const std::string& name, const PeerKey& owner,
                             const std::map<std::string, std::string>& labels) {
  if (!valid_group_name(name)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "group name \"" + name.substr(0, 64) + "\" must be 1..64 of A-Z a-z 0-9 . _ -");
  }
  if (group_id.size() != 32 || !std::all_of(group_id.begin(), group_id.end(),
                                            [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return make_error(ErrorCode::kInvalidArgument, "a group id is 32 lower-case hex digits");
  }
  YONDER_TRY(check_labels(labels));
  Membership m;
  m.group_id = group_id;
  m.name = name;
  m.version = 1;
  m.owner = owner;
  Member self;
  self.id = owner;
  self.role = MemberRole::kAdmin;
  self.labels = labels;
  m.members.push_back(std::move(self));
  return m;
}

Result<Membership> with_member(const Membership& held, const PeerKey& who,
                               const std::map<std::string, std::string>& labels) {
  if (is_member(held, who)) {
    return make_error(ErrorCode::kAlreadyExists, "that node is a member of group " + held.name + " already");
  }
  if (held.members.size() >= kMaxGroupMembers) {
    return make_error(ErrorCode::kResourceExhausted,
                      "group " + held.name + " has 1024 members, the most a list holds; remove one first");
  }
  YONDER_TRY(check_labels(labels));
  Membership m = next_of(held);
  Member mem;
  mem.id = who;
  mem.labels = labels;
  m.members.push_back(std::move(mem));
  return m;
}

Result<Membership> without_member(const Membership& held, const PeerKey& who) {
  if (who == held.owner) {
    return make_error(ErrorCode::kPermissionDenied, "the owner of group " + held.name + " cannot be removed from it");
  }
  auto it = std::find_if(held.members.begin(), held.members.end(), [&](const Member& x) { return x.id == who; });
  if (it == held.members.end()) {
    return make_error(ErrorCode::kNotFound, "that node is not a member of group " + held.name);
  }
  Membership m = next_of(held);
  m.members.erase(m.members.begin() + (it - held.members.begin()));
  return m;
}

Result<Membership> with_role(const Membership& held, const PeerKey& who, MemberRole role) {
  if (who == held.owner) {
    return make_error(ErrorCode::kPermissionDenied,
                      "the owner of group " + held.name + " is always an admin; its role cannot change");
  }
  Membership m = next_of(held);
  auto it = std::find_if(m.members.begin(), m.members.end(), [&](const Member& x) { return x.id == who; });
  if (it == m.members.end()) {
    return make_error(ErrorCode::kNotFound, "that node is not a member of group " + held.name);
  }
  if (it->role == role) {
    return make_error(ErrorCode::kAlreadyExists, std::string("that node is ") +
                                                     (role == MemberRole::kAdmin ? "an admin" : "no admin") +
                                                     " of group " + held.name + " already");
  }
  it->role = role;
  return m;
}

Result<Membership> with_label(const Membership& held, const PeerKey& who, const std::string& key,
                              const std::string& value) {
  YONDER_TRY(check_label(key, value));
  Membership m = next_of(held);
  auto it = std::find_if(m.members.begin(), m.members.end(), [&](const Member& x) { return x.id == who; });
  if (it == m.members.end()) {
    return make_error(ErrorCode::kNotFound, "that node is not a member of group " + held.name);
  }
  if (value.empty()) {
    it->labels.erase(key);
  } else {
    it->labels[key] = value;
  }
  YONDER_TRY(check_labels(it->labels));
  return m;
}

Result<Membership> with_relay(const Membership& held, const LinkRelay& relay) {
  if (!relay.key) {
    return make_error(ErrorCode::kInvalidArgument,
                      "relay " + relay.address + " needs its key: HOST:PORT@NODE_ID (yonder-relay prints its node id "
                      "at start), so members can check they reach that relay and no other");
  }
  auto same = [&](const LinkRelay& r) { return r.address == relay.address; };
  if (std::any_of(held.relays.begin(), held.relays.end(), same)) {
    return make_error(ErrorCode::kAlreadyExists, "group " + held.name + " lists relay " + relay.address +
                                                     " already; remove it first to change its key");
  }
  if (held.relays.size() >= kMaxGroupRelays) {
    return make_error(ErrorCode::kResourceExhausted, "group " + held.name + " lists " +
                                                         std::to_string(kMaxGroupRelays) +
                                                         " relays, the most a list carries; remove one first");
  }
  Membership m = next_of(held);
  m.relays.push_back(relay);
  return m;
}

Result<Membership> without_relay(const Membership& held, const std::string& address) {
  Membership m = next_of(held);
  auto it = std::find_if(m.relays.begin(), m.relays.end(), [&](const LinkRelay& r) { return r.address == address; });
  if (it == m.relays.end()) {
    return make_error(ErrorCode::kNotFound, "group " + held.name + " lists no relay at " + address +
                                                "; `yonder group list` shows its relays");
  }
  m.relays.erase(it);
  return m;
}

}  // namespace yonder::mesh
