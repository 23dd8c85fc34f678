#include "mesh/groups/groups.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <set>

#include <sodium.h>
#include <spdlog/spdlog.h>

#include "base/bytes.h"
#include "crypto/node_id.h"
#include "mesh/core/group_edit.h"

namespace yonder::mesh {
namespace {

using mesh::Membership;
using mesh::MembershipVerdict;
using nlohmann::json;

std::string id_text(const mesh::PeerKey& k) {
  return NodeId(k).to_string();
}

std::string groups_string_field(const json& b, const char* name) {
  auto it = b.find(name);
  return it != b.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const char* role_of(const Membership& m, const mesh::PeerKey& k) {
  if (k == m.owner) return "owner";
  return mesh::is_admin(m, k) ? "admin" : "member";
}

json relays_json(const Membership& m) {
  json out = json::array();
  for (const auto& r : m.relays) out.push_back(r.text());
  return out;
}

Error not_admin(const Membership& m) {
  return make_error(ErrorCode::kPermissionDenied, "this node is not the owner or an admin of group " + m.name +
                                                      "; ask its owner (" + NodeId(m.owner).short_form() + ")");
}

}  // namespace

Groups::Groups(reach::Peers& link, const Identity& identity, std::string self_name, std::unique_ptr<GroupStore> store)
    : link_(link),
      identity_(identity),
      self_(identity.public_key()),
      self_name_(std::move(self_name)),
      store_(std::move(store)) {}

Status Groups::load() {
  auto rows = store_->list();
  if (!rows) return std::move(rows).error().with_context("reading groups");
  for (const auto& row : *rows) {
    auto m = mesh::decode_membership(row.membership_json);
    if (!m || m->group_id != row.group_id || id_text(m->owner) != row.owner_id) {
      spdlog::warn("group {} ({}): the stored list does not decode; dropping it", row.name, row.group_id);
      (void)store_->remove(row.group_id);
      continue;
    }
    Held& h = groups_[row.group_id];
    h.list = std::move(*m);
    note_proof(h);
  }
  tell_relays();
  return ok_status();
}

std::vector<Groups::GroupRelay> Groups::relays() const {
  std::vector<GroupRelay> out;
  for (const auto& [id, g] : groups_) {
    for (const auto& r : g.list.relays) out.push_back(GroupRelay{r, g.list.name});
  }
  return out;
}

void Groups::tell_relays() {
  auto now = relays();
  std::vector<std::string> text;
  for (const auto& r : now) text.push_back(r.group + " " + r.relay.text());
  if (relays_told_ && *relays_told_ == text) return;
  relays_told_ = std::move(text);
  relays_changed_.fire(now);
}

bool Groups::paired(const mesh::PeerKey& key) const {
  return link_.grant_of(key).has_value();
}

Result<Groups::AdminEdit> Groups::admin_edit(const std::string& request_body) const {
  auto body = api::parse_json_body(request_body.empty() ? "{}" : request_body);
  if (!body) return body.error();
  auto g = find(groups_string_field(*body, "group"));
  if (!g) return g.error();
  if (!mesh::is_admin((*g)->list, self_)) return not_admin((*g)->list);
  return AdminEdit{std::move(*body), *g};
}

Result<const Groups::Held*> Groups::find(const std::string& text) const {
  std::vector<const Held*> by_name, by_id;
  for (auto& [id, g] : groups_) {
    if (g.list.name == text) by_name.push_back(&g);
    if (text.size() >= 4 && id.rfind(text, 0) == 0) by_id.push_back(&g);
  }
  if (by_name.size() == 1) return by_name[0];
  if (by_name.size() > 1) {
    return make_error(ErrorCode::kInvalidArgument, "more than one group is named \"" + text +
                                                       "\"; name it by its id (`yonder group list` shows them)");
  }
  if (by_id.size() == 1) return by_id[0];
  return make_error(ErrorCode::kNotFound,
                    "this node is in no group \"" + text.substr(0, 80) + "\"; `yonder group list` shows its groups");
}

Result<Membership> Groups::membership(const std::string& name_or_id) const {
  auto g = find(name_or_id);
  if (!g) return std::move(g).error();
  return (*g)->list;
}

std::vector<Membership> Groups::memberships() const {
  std::vector<Membership> out;
  for (const auto& [id, g] : groups_) out.push_back(g.list);
  return out;
}

Result<mesh::PeerKey> Groups::member_key(const Held& g, const std::string& text) const {
  if (auto id = NodeId::parse(text)) return id->public_key();
  if (auto t = link_.target(text)) return t->key;
  std::vector<mesh::PeerKey> hits;
  for (const auto& m : g.list.members) {
    if (text.size() >= 4 && id_text(m.id).rfind(text, 0) == 0) hits.push_back(m.id);
  }
  if (hits.size() == 1) return hits[0];
  return make_error(ErrorCode::kNotFound, "no member \"" + text.substr(0, 80) + "\" in group " + g.list.name +
                                              "; `yonder group members " + g.list.name + "` lists them");
}

Result<Membership> Groups::sign_next(Result<Membership> next) {
  if (!next) return std::move(next).error();
  mesh::sign_membership(*next, identity_);
  return next;
}

void Groups::drop(const std::string& group_id, const std::string& why) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return;
  spdlog::info("left group {} ({}): {}", it->second.list.name, group_id, why);
  if (auto st = store_->remove(group_id); !st) spdlog::warn("group {}: {}", group_id, st.error().to_string());
  groups_.erase(it);
  tell_relays();
}

Status Groups::adopt(const Membership& m, const std::optional<mesh::PeerKey>& from,
                     const std::optional<mesh::PeerKey>& removed) {
  if (!mesh::is_member(m, self_)) {
    drop(m.group_id, "version " + std::to_string(m.version) + " no longer lists this node");
    return ok_status();
  }
  GroupRow row;
  row.group_id = m.group_id;
  row.name = m.name;
  row.owner_id = id_text(m.owner);
  row.version = m.version;
  row.membership_json = mesh::encode_membership(m);
  YONDER_TRY(store_->put(row));  // durable before anyone hears of it
  // Whom to tell: the members of the new list, and those of the previous
  // one it drops (whoever removed them, so a removal by an admin that is not
  // paired with the member still reaches it through the others).
  std::set<mesh::PeerKey> to;
  for (const auto& mem : m.members) to.insert(mem.id);
  Held& h = groups_[m.group_id];
  for (const auto& mem : h.list.members) to.insert(mem.id);
  if (removed) to.insert(*removed);
  h.list = m;
  note_proof(h);
  tell_relays();
  spdlog::info("group {} is at version {} ({} members)", m.name, m.version, m.members.size());
  for (const auto& key : to) {
    if (key != self_ && (!from || key != *from)) push(m, key);
  }
  return ok_status();
}

void Groups::note_proof(Held& h) const {
  const Membership& m = h.list;
  if (m.owner == self_ || !mesh::is_admin(m, self_)) {
    h.proof.reset();
    return;
  }
  if (m.signer == m.owner) h.proof = m;
}

void Groups::ask_proof(const std::string& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end() || it->second.proof) return;
  const Membership& held = it->second.list;
  if (held.owner == self_ || !mesh::is_admin(held, self_) || !paired(held.owner)) return;
  auto t = link_.target(id_text(held.owner));
  if (!t) return;
  link_.service().call(held.owner, t->addresses, "group.proof", json{{"group", group_id}},
                       [this, group_id](Result<json> r) {
                         auto g = groups_.find(group_id);  // may be gone by now
                         if (!r || g == groups_.end() || !mesh::is_admin(g->second.list, self_)) return;
                         auto p = mesh::decode_membership(groups_string_field(*r, "membership"));
                         const Membership& now = g->second.list;
                         if (!p || p->group_id != group_id ||
                             mesh::judge_membership_update(nullptr, now.owner, *p) != MembershipVerdict::kAccept ||
                             !mesh::is_admin(*p, self_)) {
                           spdlog::info("group {}: the owner's admin proof does not verify", now.name);
                           return;
                         }
                         g->second.proof = std::move(*p);
                       });
}

void Groups::push(const Membership& m, const mesh::PeerKey& to) {
  if (!paired(to)) return;  // gossip rides existing links only
  auto t = link_.target(id_text(to));
  if (!t) return;
  link_.service().call(
      to, t->addresses, "group.membership", json{{"membership", mesh::encode_membership(m)}},
      [this, to, name = m.name](Result<json> r) {
        if (!r) {
          spdlog::debug("group {}: push to {}: {}", name, id_text(to).substr(0, 7), r.error().message());
          return;
        }
        // A stale push is answered with the newer list: take it.
        if (r->contains("membership") && (*r)["membership"].is_string()) {
          auto took = receive(to, (*r)["membership"].get<std::string>());
          if (!took)
            spdlog::info("group {}: answer from {}: {}", name, id_text(to).substr(0, 7), took.error().message());
        }
      });
}

Result<json> Groups::receive(const mesh::PeerKey& from, const std::string& text) {
  auto m = mesh::decode_membership(text);
  if (!m) return std::move(m).error();
  auto it = groups_.find(m->group_id);
  if (it == groups_.end()) {
    return make_error(ErrorCode::kNotFound, "this node is not in group " + m->name + " (" + m->group_id + ")");
  }
  const Membership& held = it->second.list;
  switch (mesh::judge_membership_update(&held, held.owner, *m)) {
    case MembershipVerdict::kRejected:
      spdlog::warn("group {}: refused version {} from {}: not signed by the owner or an admin of the list held",
                   held.name, m->version, id_text(from).substr(0, 7));
      return make_error(ErrorCode::kPermissionDenied,
                        "membership of group " + held.name +
                            " refused: it is not signed by the group's owner or one of its admins (or names "
                            "another owner)");
    case MembershipVerdict::kStale: {
      json answer = {{"verdict", "stale"}, {"version", held.version}};
      if (!(held == *m)) answer["membership"] = mesh::encode_membership(held);
      return answer;
    }
    case MembershipVerdict::kAccept: break;
  }
  Membership accepted = std::move(*m);
  YONDER_TRY(adopt(accepted, from, std::nullopt));
  return json{{"verdict", "accepted"}, {"version", accepted.version}};
}

json Groups::on_redeemed(const LinkIdBytes& id, const PublicKeyBytes& key) {
  auto group_id = store_->invite_group(hex_encode(id));
  if (!group_id) {
    spdlog::warn("group invites: {}", group_id.error().to_string());
    return json::object();
  }
  if (!*group_id) return json::object();  // an ordinary share link
  auto it = groups_.find(**group_id);
  if (it == groups_.end()) return json::object();  // the group is gone; the pairing stands
  const Membership& held = it->second.list;
  json answer = {{"groups", json::array({held.group_id})}};
  if (mesh::is_member(held, key)) return answer;
  if (!mesh::is_admin(held, self_)) {
    spdlog::warn("group {}: an invite was redeemed, but this node is no longer an admin", held.name);
    return json::object();
  }
  auto next = sign_next(mesh::with_member(held, key));
  if (!next) {
    spdlog::warn("group {}: cannot add {}: {}", held.name, id_text(key).substr(0, 7), next.error().message());
    return json::object();
  }
  // The newcomer asks for the list once its pairing is answered (group.sync).
  if (auto st = adopt(*next, key, std::nullopt); !st) {
    spdlog::warn("group {}: {}", held.name, st.error().to_string());
    return json::object();
  }
  member_added_.fire(key);
  return answer;
}

void Groups::on_paired(const PublicKeyBytes& provider, const json& answer, std::function<void(json)> done) {
  auto invited = answer.find("groups");
  if (invited == answer.end() || !invited->is_array() || invited->empty()) return done(json::array());
  auto t = link_.target(id_text(provider));
  if (!t) return done(json::array());
  link_.service().call(
      provider, t->addresses, "group.sync", json::object(), [this, provider, done = std::move(done)](Result<json> r) {
        json joined = json::array();
        if (!r) {
          spdlog::info("pairing: could not ask {} for group lists: {}", id_text(provider).substr(0, 7),
                       r.error().message());
          return done(joined);
        }
        const json& lists = (*r)["memberships"];
        if (!lists.is_array()) return done(joined);
        const json& proofs = (*r)["proofs"];
        // An admin-signed first list: valid with an owner-signed list naming its signer admin.
        auto proven = [&](const Membership& m) {
          if (!proofs.is_object() || m.signer != provider) return false;
          auto p = mesh::decode_membership(groups_string_field(proofs, m.group_id.c_str()));
          return p && p->group_id == m.group_id &&
                 mesh::judge_membership_update(nullptr, m.owner, *p) == MembershipVerdict::kAccept &&
                 mesh::is_admin(*p, m.signer) && mesh::membership_signature_valid(m);
        };
        for (const auto& text : lists) {
          if (!text.is_string()) continue;
          auto m = mesh::decode_membership(text.get<std::string>());
          if (!m) continue;
          if (groups_.count(m->group_id)) {
            (void)receive(provider, text.get<std::string>());
            continue;
          }
          // A group this node does not hold: only through the inviter just paired with.
          bool first = mesh::judge_membership_update(nullptr, m->owner, *m) == MembershipVerdict::kAccept;
          if (!(first || proven(*m)) || !mesh::is_member(*m, self_) || !mesh::is_admin(*m, provider)) {
            continue;
          }
          if (auto st = adopt(*m, provider, std::nullopt); !st) {
            spdlog::warn("group {}: {}", m->name, st.error().to_string());
            continue;
          }
          spdlog::info("joined group {} ({}), owner {}", m->name, m->group_id, id_text(m->owner));
          joined.push_back(summary(groups_.at(m->group_id)));
        }
        done(joined);
      });
}

void Groups::on_session(const PublicKeyBytes& peer) {
  std::vector<std::string> proofless;
  for (const auto& [id, g] : groups_) {
    if (peer != self_ && mesh::is_member(g.list, peer)) push(g.list, peer);
    if (peer == g.list.owner && !g.proof && mesh::is_admin(g.list, self_)) proofless.push_back(id);
  }
  for (const auto& id : proofless) ask_proof(id);
}

void Groups::register_methods() {
  auto& service = link_.service();
  service.add_method("group.membership", [this](const PublicKeyBytes& peer, const json& params, link::RpcReply reply) {
    if (!params.contains("membership") || !params["membership"].is_string()) {
      return reply(make_error(ErrorCode::kInvalidArgument, "group.membership needs {\"membership\": \"<list>\"}"));
    }
    reply(receive(peer, params["membership"].get<std::string>()));
  });
  service.add_method("group.sync", [this](const PublicKeyBytes& peer, const json&, link::RpcReply reply) {
    json lists = json::array();
    json proofs = json::object();
    for (const auto& [id, g] : groups_) {
      if (!mesh::is_member(g.list, peer)) continue;
      lists.push_back(mesh::encode_membership(g.list));
      if (g.proof) proofs[id] = mesh::encode_membership(*g.proof);
    }
    reply(json{{"memberships", lists}, {"proofs", proofs}});
  });
  service.add_method("group.proof", [this](const PublicKeyBytes& peer, const json& params, link::RpcReply reply) {
    auto it = groups_.find(groups_string_field(params, "group"));
    if (it == groups_.end()) return reply(make_error(ErrorCode::kNotFound, "this node is not in that group"));
    const Membership& held = it->second.list;
    if (held.owner != self_)
      return reply(make_error(ErrorCode::kPermissionDenied, "only the group's owner signs proofs"));
    if (!mesh::is_admin(held, peer)) {
      return reply(make_error(ErrorCode::kPermissionDenied, "the caller is no admin of group " + held.name));
    }
    Membership proof = held;
    mesh::sign_membership(proof, identity_);
    reply(json{{"membership", mesh::encode_membership(proof)}});
  });
  service.add_method("group.leave", [this](const PublicKeyBytes& peer, const json& params, link::RpcReply reply) {
    auto it = groups_.find(groups_string_field(params, "group"));
    if (it == groups_.end()) return reply(make_error(ErrorCode::kNotFound, "this node is not in that group"));
    const Membership& held = it->second.list;
    if (!mesh::is_admin(held, self_)) return reply(not_admin(held));
    auto next = sign_next(mesh::without_member(held, peer));
    if (!next) return reply(std::move(next).error());
    if (auto st = adopt(*next, peer, std::nullopt); !st) return reply(st.error());
    spdlog::info("group {}: {} left", next->name, id_text(peer).substr(0, 7));
    reply(json{{"version", next->version}});
  });
  link_.on_redeemed(
      [this](const LinkIdBytes& id, const PublicKeyBytes& key, const std::string&) { return on_redeemed(id, key); });
  link_.on_paired([this](const PublicKeyBytes& provider, const json& answer, std::function<void(json)> done) {
    on_paired(provider, answer, std::move(done));
  });
  link_.on_session([this](const PublicKeyBytes& peer) { on_session(peer); });
}

json Groups::summary(const Held& g) const {
  return {{"group_id", g.list.group_id},    {"name", g.list.name},
          {"version", g.list.version},      {"owner_id", id_text(g.list.owner)},
          {"role", role_of(g.list, self_)}, {"members", g.list.members.size()},
          {"relays", relays_json(g.list)}};
}

json Groups::members_json(const Held& g) const {
  auto sessions = link_.service().sessions();
  json arr = json::array();
  for (const auto& m : g.list.members) {
    bool self = m.id == self_;
    bool online = self;
    for (const auto& s : sessions) online = online || (s.peer == m.id && s.established);
    std::string name = self ? self_name_ : "";
    if (!self) {
      if (auto t = link_.target(id_text(m.id))) name = t->name;
    }
    json labels = json::object();
    for (const auto& [k, v] : m.labels) labels[k] = v;
    arr.push_back({{"id", id_text(m.id)},
                   {"name", name},
                   {"role", role_of(g.list, m.id)},
                   {"labels", labels},
                   {"online", online},
                   {"self", self}});
  }
  json out = summary(g);
  out["signer_id"] = id_text(g.list.signer);
  // An admin's invitees need its owner-signed proof (see groups.h).
  if (g.list.owner != self_ && mesh::is_admin(g.list, self_)) out["admin_proof"] = g.proof.has_value();
  out["members"] = arr;
  return out;
}

void Groups::add_routes(api::Router& router) {
  using api::Reply;
  using api::Request;
  using api::Response;
  auto body_of = [](const Request& req) { return api::parse_json_body(req.body.empty() ? "{}" : req.body); };

  router.add("GET", "/v1/groups", [this](const Request&, Reply reply) {
    json arr = json::array();
    for (const auto& [id, g] : groups_) arr.push_back(summary(g));
    reply(Response::json(200, {{"groups", arr}}));
  });

  router.add("POST", "/v1/groups", [this, body_of](const Request& req, Reply reply) {
    auto body = body_of(req);
    if (!body) return reply(Response::error(body.error()));
    std::string name = groups_string_field(*body, "name");
    for (const auto& [id, g] : groups_) {
      if (g.list.name == name) {
        return reply(Response::error(make_error(
            ErrorCode::kAlreadyExists, "this node is in a group named " + name + " already; pick another name")));
      }
    }
    std::map<std::string, std::string> labels;
    if (body->contains("labels")) {
      if (!(*body)["labels"].is_object()) {
        return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "labels must be an object {k: v}")));
      }
      for (auto it = (*body)["labels"].begin(); it != (*body)["labels"].end(); ++it) {
        if (!it->is_string()) {
          return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "label values must be strings")));
        }
        labels[it.key()] = it->get<std::string>();
      }
    }
    uint8_t raw[16];
    randombytes_buf(raw, sizeof raw);
    auto m = sign_next(mesh::new_group(hex_encode(ByteView(raw, sizeof raw)), name, self_, labels));
    if (!m) return reply(Response::error(m.error()));
    if (auto st = adopt(*m, std::nullopt, std::nullopt); !st) return reply(Response::error(st.error()));
    reply(Response::json(200, summary(groups_.at(m->group_id))));
  });

  router.add("POST", "/v1/groups/invite", [this](const Request& req, Reply reply) {
    auto edit = admin_edit(req.body);
    if (!edit) return reply(Response::error(edit.error()));
    const Membership& held = edit->group->list;
    json share = edit->body;
    share.erase("group");
    share["label"] = "group " + held.name;
    auto made = link_.share(share);
    if (!made) return reply(Response::error(made.error()));
    if (auto st = store_->add_invite(made->value("id", ""), held.group_id); !st) {
      return reply(Response::error(st.error()));
    }
    (*made)["group"] = held.name;
    (*made)["group_id"] = held.group_id;
    reply(Response::json(200, *made));
  });

  router.add("POST", "/v1/groups/leave", [this, body_of](const Request& req, Reply reply) {
    auto body = body_of(req);
    if (!body) return reply(Response::error(body.error()));
    auto g = find(groups_string_field(*body, "group"));
    if (!g) return reply(Response::error(g.error()));
    const Membership& held = (*g)->list;
    if (held.owner == self_) {
      return reply(Response::error(
          make_error(ErrorCode::kFailedPrecondition,
                     "this node owns group " + held.name + "; an owner cannot leave (remove the members instead)")));
    }
    // Whoever may sign the next version: the owner first, then an admin we are paired with.
    std::optional<mesh::PeerKey> signer;
    if (paired(held.owner)) signer = held.owner;
    for (const auto& m : held.members) {
      if (!signer && m.id != self_ && m.role == mesh::MemberRole::kAdmin && paired(m.id)) signer = m.id;
    }
    if (!signer) {
      return reply(Response::error(
          make_error(ErrorCode::kUnavailable, "this node is paired with neither the owner nor an admin of group " +
                                                  held.name + ", so none can sign the list without it")));
    }
    auto t = link_.target(id_text(*signer));
    if (!t) return reply(Response::error(t.error()));
    std::string group_id = held.group_id;
    link_.service().call(
        *signer, t->addresses, "group.leave", json{{"group", group_id}}, [this, group_id, reply](Result<json> r) {
          if (!r) {
            return reply(Response::error(
                Error(r.error()).with_context("telling the group's owner; try again when it is online")));
          }
          drop(group_id, "left");
          reply(Response::json(200, {{"left", true}, {"group_id", group_id}, {"version", r->value("version", 0)}}));
        });
  });

  router.add("POST", "/v1/groups/remove", [this](const Request& req, Reply reply) {
    auto edit = admin_edit(req.body);
    if (!edit) return reply(Response::error(edit.error()));
    const json& body = edit->body;
    const Membership& held = edit->group->list;
    auto who = member_key(*edit->group, groups_string_field(body, "member"));
    if (!who) return reply(Response::error(who.error()));
    auto next = sign_next(mesh::without_member(held, *who));
    if (!next) return reply(Response::error(next.error()));
    mesh::PeerKey removed = *who;
    if (auto st = adopt(*next, std::nullopt, removed); !st) return reply(Response::error(st.error()));
    reply(Response::json(200, {{"removed", id_text(removed)}, {"version", next->version}}));
  });

  router.add("POST", "/v1/groups/label", [this](const Request& req, Reply reply) {
    auto edit = admin_edit(req.body);
    if (!edit) return reply(Response::error(edit.error()));
    const json& body = edit->body;
    const Membership& held = edit->group->list;
    auto who = member_key(*edit->group, groups_string_field(body, "member"));
    if (!who) return reply(Response::error(who.error()));
    auto next =
        sign_next(mesh::with_label(held, *who, groups_string_field(body, "key"), groups_string_field(body, "value")));
    if (!next) return reply(Response::error(next.error()));
    if (auto st = adopt(*next, std::nullopt, std::nullopt); !st) return reply(Response::error(st.error()));
    reply(Response::json(200, {{"version", next->version}}));
  });

  // The owner alone promotes and demotes: an admin cannot make others admins.
  router.add("POST", "/v1/groups/admin", [this, body_of](const Request& req, Reply reply) {
    auto body = body_of(req);
    if (!body) return reply(Response::error(body.error()));
    auto g = find(groups_string_field(*body, "group"));
    if (!g) return reply(Response::error(g.error()));
    const Membership& held = (*g)->list;
    if (held.owner != self_) {
      return reply(Response::error(make_error(ErrorCode::kPermissionDenied, "only the owner of group " + held.name +
                                                                                " (" + NodeId(held.owner).short_form() +
                                                                                ") can make or unmake admins")));
    }
    auto admin = body->find("admin");
    if (admin != body->end() && !admin->is_boolean()) {
      return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "\"admin\" must be true or false")));
    }
    bool promote = admin == body->end() || admin->get<bool>();
    auto who = member_key(**g, groups_string_field(*body, "member"));
    if (!who) return reply(Response::error(who.error()));
    auto next = sign_next(mesh::with_role(held, *who, promote ? mesh::MemberRole::kAdmin : mesh::MemberRole::kMember));
    if (!next) return reply(Response::error(next.error()));
    if (auto st = adopt(*next, std::nullopt, std::nullopt); !st) return reply(Response::error(st.error()));
    reply(Response::json(
        200, {{"member", id_text(*who)}, {"role", promote ? "admin" : "member"}, {"version", next->version}}));
  });

  // One of the group's relays added or removed, by the owner or an admin.
  router.add("POST", "/v1/groups/relay", [this](const Request& req, Reply reply) {
    auto edit = admin_edit(req.body);
    if (!edit) return reply(Response::error(edit.error()));
    const json& body = edit->body;
    const Membership& held = edit->group->list;
    std::string add = groups_string_field(body, "add");
    std::string remove = groups_string_field(body, "remove");
    if (add.empty() == remove.empty()) {
      return reply(Response::error(make_error(ErrorCode::kInvalidArgument,
                                              "give one of \"add\" (HOST:PORT@NODE_ID) or \"remove\" (HOST:PORT)")));
    }
    Result<Membership> next = make_error(ErrorCode::kInternal, "unset");
    if (!add.empty()) {
      auto relay = parse_link_relay(add);
      if (!relay) return reply(Response::error(relay.error()));
      next = sign_next(mesh::with_relay(held, *relay));
    } else {
      std::string address = remove.substr(0, remove.find('@'));  // HOST:PORT@NODE_ID works too
      next = sign_next(mesh::without_relay(held, address));
    }
    if (!next) return reply(Response::error(next.error()));
    if (auto st = adopt(*next, std::nullopt, std::nullopt); !st) return reply(Response::error(st.error()));
    reply(Response::json(200, {{"relays", relays_json(*next)}, {"version", next->version}}));
  });

  router.add("GET", "/v1/groups/members", [this](const Request& req, Reply reply) {
    auto q = api::parse_query(req.query);
    auto g = find(q["group"]);
    if (!g) return reply(Response::error(g.error()));
    reply(Response::json(200, members_json(**g)));
  });
}

}  // namespace yonder::mesh
