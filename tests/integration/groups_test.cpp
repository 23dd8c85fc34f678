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
#include <thread>

#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "mesh/membership.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

// `yonder group members lab --json` on `node` (null when it is not in the group).
json members(const Node& node) {
  auto r = node.yonder({"group", "members", "lab", "--json"});
  if (r.exit_code != 0) return nullptr;
  return json::parse(r.out, nullptr, false);
}

// Polls `check` until it holds or 30 s pass; the last state goes into the failure.
bool eventually(const std::function<bool(std::string&)>& check) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check(last)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
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

}  // namespace
}  // namespace yonder::testing
