// Groups end to end (issue 10): three real yonderds over loopback links.
// The owner invites two nodes with group invite links; every member ends up
// with the same signed list (same version) by gossip; a removal reaches the
// remaining member by gossip and the removed one learns it; a member leaves
// through the owner; a list signed by a non-admin, sent through the
// group.membership link method, is refused and changes nothing. Waits poll
// the daemons' state with a deadline (no fixed sleeps).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>

#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "mesh/core/group_edit.h"
#include "mesh/core/membership.h"
#include "support/job_node.h"
#include "support/relay_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

// `yonder group members lab --json` on `node` (null when it is not in the group).
json members(const Node& node) {
  auto r = node.yonder({"group", "members", "lab", "--json"});
  if (r.exit_code != 0) return nullptr;
  return json::parse(r.out, nullptr, false);
}

// Polls `check` until it holds or 120 s pass; the last state goes into the failure.
bool eventually(const std::function<bool(std::string&)>& check) {
  std::string last;
  if (wait_until([&] { return check(last); }, std::chrono::seconds(120), std::chrono::milliseconds(50))) return true;
  ADD_FAILURE() << "timed out; last state: " << last;
  return false;
}

// Every node in `nodes` holds version `version` listing exactly `ids`.
bool all_at(const std::vector<const Node*>& nodes, uint64_t version, std::vector<std::string> ids, std::string& last) {
  std::sort(ids.begin(), ids.end());
  for (const Node* n : nodes) {
    json m = members(*n);
    last = n->home() + ": " + m.dump();
    if (!m.is_object() || m.value("version", uint64_t{0}) != version) return false;
    std::vector<std::string> got;
    for (const auto& x : m["members"]) got.push_back(x.value("id", ""));
    std::sort(got.begin(), got.end());
    if (got != ids) return false;
  }
  return true;
}

bool in_no_group(const Node& node, std::string& last) {
  json l = node.yonder_json({"group", "list"});
  last = node.home() + ": " + l.dump();
  return l["groups"].is_array() && l["groups"].empty();
}

TEST(Groups, InviteGossipRemoveLeaveAndForgedListsRefused) {
  TempDir dir;
  Node alpha(dir, "alpha", false), beta(dir, "beta", false), gamma(dir, "gamma", false);

  json created = alpha.yonder_json({"group", "create", "lab", "--label", "site=lab2"});
  ASSERT_EQ(created.value("version", 0), 1) << created.dump();
  EXPECT_EQ(created.value("role", ""), "owner");

  for (const Node* joiner : {&beta, &gamma}) {
    json invite = alpha.yonder_json({"group", "invite", "lab", "--scope", "run"});
    auto joined = joiner->yonder({"group", "join", invite.value("link", ""), "--json"});
    ASSERT_EQ(joined.exit_code, 0) << joined.err;
    json j = json::parse(joined.out, nullptr, false);
    ASSERT_TRUE(j.is_object() && j["groups"].size() == 1) << joined.out;
    EXPECT_EQ(j["groups"][0].value("name", ""), "lab");
    // Membership is not a grant: the pairing has the invite's scope, nothing more.
    EXPECT_EQ(j.value("summary", "").find("run"), 0u) << j.dump();
  }

  // All three hold version 3 (create, +beta, +gamma): beta got it by gossip.
  std::vector<std::string> everyone = {alpha.node_id(), beta.node_id(), gamma.node_id()};
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma}, 3, everyone, last); }));
  json seen = members(beta);
  for (const auto& m : seen["members"]) {
    if (m["id"] == alpha.node_id()) {
      EXPECT_EQ(m.value("role", ""), "owner");
      EXPECT_EQ(m["labels"].value("site", ""), "lab2");
      EXPECT_EQ(m.value("name", ""), "alpha");
      EXPECT_TRUE(m.value("online", false));
    }
  }

  // A list signed by a node that is no admin, sent over the link, is refused.
  auto stranger = Identity::generate();
  ASSERT_TRUE(stranger.ok());
  mesh::Membership forged;
  forged.group_id = created.value("group_id", "");
  forged.name = "lab";
  forged.version = 99;
  forged.owner = NodeId::parse(alpha.node_id())->public_key();
  for (const auto& id : {alpha.node_id(), beta.node_id()}) {
    mesh::Member m;
    m.id = NodeId::parse(id)->public_key();
    forged.members.push_back(m);
  }
  mesh::sign_membership(forged, *stranger);
  auto refused =
      beta.yonder({"call", "alpha", "group.membership", json{{"membership", mesh::encode_membership(forged)}}.dump()});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE((refused.out + refused.err).find("refused"), std::string::npos) << refused.out << refused.err;
  EXPECT_EQ(members(alpha).value("version", 0), 3);

  // The owner removes gamma: beta learns it by gossip, gamma learns it too.
  auto removed = alpha.yonder({"group", "remove", "lab", gamma.node_id()});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(eventually([&](std::string& last) {
    return all_at({&alpha, &beta}, 4, {alpha.node_id(), beta.node_id()}, last);
  }));
  EXPECT_TRUE(eventually([&](std::string& last) { return in_no_group(gamma, last); }));

  // beta leaves: the owner signs version 5 without it.
  auto left = beta.yonder({"group", "leave", "lab"});
  ASSERT_EQ(left.exit_code, 0) << left.err;
  EXPECT_TRUE(eventually([&](std::string& last) { return in_no_group(beta, last); }));
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha}, 5, {alpha.node_id()}, last); }));

  // The lists survive a restart (SQLite).
  alpha.restart();
  EXPECT_EQ(members(alpha).value("version", 0), 5);
}

// A member that was down while it was removed learns it when its link to the
// owner comes back: its push of the old list is answered with the newer one.
TEST(Groups, AMemberOfflineDuringItsRemovalLearnsItOnReconnect) {
  TempDir dir;
  Node alpha(dir, "alpha", false), beta(dir, "beta", false), gamma(dir, "gamma", false);
  ASSERT_EQ(alpha.yonder({"group", "create", "lab"}).exit_code, 0);
  for (const Node* joiner : {&beta, &gamma}) {
    json invite = alpha.yonder_json({"group", "invite", "lab"});
    auto joined = joiner->yonder({"group", "join", invite.value("link", "")});
    ASSERT_EQ(joined.exit_code, 0) << joined.err;
  }
  std::vector<std::string> everyone = {alpha.node_id(), beta.node_id(), gamma.node_id()};
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma}, 3, everyone, last); }));

  ASSERT_EQ(gamma.daemon().stop(), 0);
  ASSERT_EQ(alpha.yonder({"group", "remove", "lab", "gamma"}).exit_code, 0);
  EXPECT_TRUE(eventually([&](std::string& last) {
    return all_at({&alpha, &beta}, 4, {alpha.node_id(), beta.node_id()}, last);
  }));
  gamma.restart();
  EXPECT_TRUE(eventually([&](std::string& last) { return in_no_group(gamma, last); }));
  // The label command makes the next version; beta follows.
  ASSERT_EQ(alpha.yonder({"group", "label", "lab", "beta", "gpu=rtx4090"}).exit_code, 0);
  EXPECT_TRUE(eventually([&](std::string& last) {
    json m = members(beta);
    last = m.dump();
    for (const auto& x : m["members"]) {
      if (x["id"] == beta.node_id() && x["labels"].value("gpu", "") == "rtx4090") return m["version"] == 5;
    }
    return false;
  }));
}

// The identity a node's daemon signs with (its unencrypted key file).
Identity identity_of(const Node& node) {
  auto text = read_key_file(node.home() + "/identity.key");
  EXPECT_TRUE(text.ok());
  auto file = parse_key_file(*text);
  EXPECT_TRUE(file.ok());
  auto id = open_key_file(*file, std::nullopt);
  EXPECT_TRUE(id.ok());
  return std::move(*id);
}

// `role` of `id` in `node`'s list.
std::string role_in(const Node& node, const std::string& id) {
  json m = members(node);
  if (!m.is_object()) return "";
  for (const auto& x : m["members"]) {
    if (x["id"] == id) return x.value("role", "");
  }
  return "";
}

// The owner promotes beta; beta (an admin, not paired with gamma) invites
// delta and removes gamma, and every member converges, gamma included; the
// owner demotes beta, after which a list beta signs is refused.
TEST(Groups, AnAdminInvitesAndRemovesUntilTheOwnerDemotesIt) {
  TempDir dir;
  Node alpha(dir, "alpha", false), beta(dir, "beta", false), gamma(dir, "gamma", false), delta(dir, "delta", false);
  ASSERT_EQ(alpha.yonder({"group", "create", "lab"}).exit_code, 0);
  for (const Node* joiner : {&beta, &gamma}) {
    json invite = alpha.yonder_json({"group", "invite", "lab"});
    ASSERT_EQ(joiner->yonder({"group", "join", invite.value("link", "")}).exit_code, 0);
  }
  std::vector<std::string> three = {alpha.node_id(), beta.node_id(), gamma.node_id()};
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma}, 3, three, last); }));

  // Only the owner makes admins; a member cannot invite yet.
  auto r = beta.yonder({"group", "admin", "lab", "gamma"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("only the owner of group lab"), std::string::npos) << r.err;
  r = beta.yonder({"group", "invite", "lab"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not the owner or an admin"), std::string::npos) << r.err;

  r = alpha.yonder({"group", "admin", "lab", "beta"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("is an admin of group lab (version 4)"), std::string::npos) << r.out;
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma}, 4, three, last); }));
  EXPECT_EQ(role_in(gamma, beta.node_id()), "admin");
  EXPECT_NE(alpha.yonder({"group", "admin", "lab", "beta"}).exit_code, 0);  // already one

  // beta invites delta: delta takes beta's list (signed by an admin) with beta's proof.
  json invite = beta.yonder_json({"group", "invite", "lab"});
  r = delta.yonder({"group", "join", invite.value("link", "")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> four = {alpha.node_id(), beta.node_id(), gamma.node_id(), delta.node_id()};
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma, &delta}, 5, four, last); }));

  // beta removes gamma (beta and gamma are not paired): the others converge, gamma learns it through alpha.
  r = beta.yonder({"group", "remove", "lab", gamma.node_id()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> left = {alpha.node_id(), beta.node_id(), delta.node_id()};
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &delta}, 6, left, last); }));
  EXPECT_TRUE(eventually([&](std::string& last) { return in_no_group(gamma, last); }));
  // beta labels delta.
  ASSERT_EQ(beta.yonder({"group", "label", "lab", "delta", "site=lab3"}).exit_code, 0);
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &delta}, 7, left, last); }));

  // The owner demotes beta; everyone learns it.
  r = alpha.yonder({"group", "admin", "--remove", "lab", "beta"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &delta}, 8, left, last); }));
  EXPECT_EQ(role_in(delta, beta.node_id()), "member");
  r = beta.yonder({"group", "remove", "lab", "delta"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not the owner or an admin"), std::string::npos) << r.err;

  // A list beta signs anyway (version 9, without delta) is refused by the owner and by delta.
  auto sync = alpha.yonder({"call", "beta", "group.sync", "{}"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  json synced = json::parse(sync.out, nullptr, false);
  ASSERT_TRUE(synced["memberships"].is_array() && !synced["memberships"].empty()) << synced.dump();
  auto held = mesh::decode_membership(synced["memberships"][0].get<std::string>());
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->version, 8u);
  auto next = mesh::without_member(*held, NodeId::parse(delta.node_id())->public_key());
  ASSERT_TRUE(next.ok());
  mesh::sign_membership(*next, identity_of(beta));
  for (const Node* to : {&alpha, &delta}) {
    std::string peer = to == &alpha ? std::string("alpha") : delta.node_id();
    auto refused =
        beta.yonder({"call", peer, "group.membership", json{{"membership", mesh::encode_membership(*next)}}.dump()});
    EXPECT_NE(refused.exit_code, 0) << refused.out;
    EXPECT_NE((refused.out + refused.err).find("refused"), std::string::npos) << refused.out << refused.err;
  }
  EXPECT_EQ(members(alpha).value("version", 0), 8);
  EXPECT_EQ(members(delta).value("version", 0), 8);
}

// An admin restarted while the list it holds is signed by another admin has
// no owner-signed proof on disk: it asks the owner (group.proof) when their
// link comes up, and its invites work again.
TEST(Groups, ARestartedAdminGetsItsProofFromTheOwner) {
  TempDir dir;
  Node alpha(dir, "alpha", false), beta(dir, "beta", false), gamma(dir, "gamma", false), delta(dir, "delta", false);
  ASSERT_EQ(alpha.yonder({"group", "create", "lab"}).exit_code, 0);
  for (const Node* joiner : {&beta, &gamma}) {
    json invite = alpha.yonder_json({"group", "invite", "lab"});
    ASSERT_EQ(joiner->yonder({"group", "join", invite.value("link", "")}).exit_code, 0);
  }
  ASSERT_EQ(alpha.yonder({"group", "admin", "lab", "beta"}).exit_code, 0);   // v4
  ASSERT_EQ(alpha.yonder({"group", "admin", "lab", "gamma"}).exit_code, 0);  // v5
  std::vector<std::string> three = {alpha.node_id(), beta.node_id(), gamma.node_id()};
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma}, 5, three, last); }));
  // gamma (an admin) signs v6; beta then holds a list signed by gamma, not by the owner.
  ASSERT_EQ(gamma.yonder({"group", "label", "lab", beta.node_id(), "gpu=a100"}).exit_code, 0);
  ASSERT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta}, 6, three, last); }));
  EXPECT_EQ(members(beta).value("signer_id", ""), gamma.node_id());

  EXPECT_TRUE(members(beta).value("admin_proof", false));  // kept from its promotion
  beta.restart();
  // v6 (signed by gamma) is no proof, and no owner-signed list arrives by
  // itself: once beta's link to alpha is up again, beta asks alpha for one.
  EXPECT_TRUE(eventually([&](std::string& last) {
    json m = members(beta);
    last = m.dump();
    return m.value("admin_proof", false);
  }));
  json invite = beta.yonder_json({"group", "invite", "lab"});
  auto joined = delta.yonder({"group", "join", invite.value("link", "")});
  ASSERT_EQ(joined.exit_code, 0) << joined.err;
  std::vector<std::string> four = {alpha.node_id(), beta.node_id(), gamma.node_id(), delta.node_id()};
  EXPECT_TRUE(eventually([&](std::string& last) { return all_at({&alpha, &beta, &gamma, &delta}, 7, four, last); }));
}

// A group's own relay: named once in the signed list by the owner, every
// member registers there without link.relays, a member that listens nowhere
// puts it in its share links and is reached through it; taken out of the
// list, the members leave it, except one that a paired provider's link
// still names (it stays, as that provider's relay).
TEST(Groups, AMemberReachesAnotherThroughTheGroupsRelayWithoutLinkRelays) {
  TempDir dir;
  Relay relay = start_relay(dir / "relay.key", "127.0.0.1:0");
  ASSERT_FALSE(relay.node.empty()) << relay.process->output();
  Node alpha(dir, "alpha", false), beta(dir, "beta", false);
  // gamma listens nowhere: only a relay reaches it.
  Node gamma(dir, "gamma", false, {{"YONDER_LINK_LISTEN", ""}}, "[link]\nlisten = \"\"\n");
  ASSERT_EQ(alpha.yonder({"group", "create", "lab"}).exit_code, 0);
  for (const Node* joiner : {&beta, &gamma}) {
    json invite = alpha.yonder_json({"group", "invite", "lab"});
    auto joined = joiner->yonder({"group", "join", invite.value("link", "")});
    ASSERT_EQ(joined.exit_code, 0) << joined.err;
  }
  EXPECT_TRUE(eventually([&](std::string& last) {
    return all_at({&alpha, &beta, &gamma}, 3, {alpha.node_id(), beta.node_id(), gamma.node_id()}, last);
  }));
  // No listener, no relay: nobody could use a link of gamma's yet.
  auto gamma_share = gamma.yonder({"share", "--scope", "run", "--no-qr"});
  EXPECT_NE(gamma_share.exit_code, 0);
  EXPECT_NE(gamma_share.err.find("peers cannot reach this node"), std::string::npos) << gamma_share.err;

  // Only the owner or an admin names relays, and only with their keys.
  auto not_admin = beta.yonder({"group", "relay", "lab", relay.pinned()});
  EXPECT_NE(not_admin.exit_code, 0);
  EXPECT_NE(not_admin.err.find("not the owner or an admin"), std::string::npos) << not_admin.err;
  auto keyless = alpha.yonder({"group", "relay", "lab", relay.listen});
  EXPECT_NE(keyless.exit_code, 0);
  EXPECT_NE(keyless.err.find("HOST:PORT@NODE_ID"), std::string::npos) << keyless.err;
  auto named = alpha.yonder({"group", "relay", "lab", relay.pinned()});
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(named.out.find(relay.pinned()), std::string::npos) << named.out;

  // Every member has it by gossip and registers there, saying why.
  for (const Node* n : {&alpha, &beta, &gamma}) {
    json entry;
    EXPECT_TRUE(wait_until([&] {
      entry = relay_entry(*n, relay.listen);
      return entry.value("state", "") == "registered";
    }, std::chrono::seconds(120)))
        << n->home() << ": " << entry.dump();
    EXPECT_EQ(entry.value("group", ""), "lab") << entry.dump();
    EXPECT_TRUE(entry.value("pinned", false)) << entry.dump();
  }
  EXPECT_NE(gamma.yonder({"netcheck"}).out.find("[group lab]"), std::string::npos);
  EXPECT_EQ(members(beta)["relays"], json::array({relay.pinned()}));

  // gamma's links now carry the group's relay, so beta pairs with it there.
  json share = gamma.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(share["relays"], json::array({relay.listen})) << share.dump();
  auto paired = beta.yonder({"pair", share.value("link", "")});
  ASSERT_EQ(paired.exit_code, 0) << paired.err;
  auto ping = beta.yonder({"ping", "gamma", "--count", "1"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err << ping.out;
  json peers = beta.yonder_json({"peers"});
  bool via_relay = false;
  for (const auto& p : peers["peers"]) {
    if (p.value("name", "") == "gamma") via_relay = p.value("path", "") == "relay via " + relay.listen;
  }
  EXPECT_TRUE(via_relay) << peers.dump();

  // Out of the list: gamma leaves the relay; beta keeps it as gamma's relay.
  auto removed = alpha.yonder({"group", "relay", "lab", relay.pinned(), "--remove"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(eventually([&](std::string& last) {
    json e = relay_entry(gamma, relay.listen);
    last = e.dump();
    return e.is_null();
  }));
  json kept = relay_entry(beta, relay.listen);
  EXPECT_TRUE(eventually([&](std::string& last) {
    kept = relay_entry(beta, relay.listen);
    last = kept.dump();
    return kept.is_object() && kept.value("group", "x").empty();
  }));
  EXPECT_EQ(beta.yonder({"ping", "gamma", "--count", "1"}).exit_code, 0);
}

}  // namespace
}  // namespace yonder::testing
