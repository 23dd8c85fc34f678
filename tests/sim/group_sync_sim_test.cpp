// Groups (mesh/groups/groups.h) on several nodes over the in-memory network:
// the real Groups service and its SQLite store on each node, driven through
// its local routes as the CLI drives it, the lists carried by real link
// services over seeded in-memory carriers (sim_peers.h). What is checked is
// the sync groups.cpp does: an invite redeemed puts the holder in the next
// version, pushed to every member; a removal reaches the removed member,
// which drops the group; a member cut off during changes catches up when
// its session comes back (both sides push what they hold), or earlier
// through another member it is paired with (accepted lists are pushed on).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/server.h"
#include "mesh/core/membership.h"
#include "mesh/groups/group_store.h"
#include "mesh/groups/groups.h"
#include "sim/sim_peers.h"

namespace yonder::sim {
namespace {

using nlohmann::json;

constexpr uint64_t kSeeds[] = {1, 2, 3, 17, 4242};

// One node's groups: the service as the daemon builds it, and its routes.
struct GroupNode {
  explicit GroupNode(SimNode& n) : node(n) {
    auto store = mesh::GroupStore::open(n.db);
    if (!store) std::abort();
    groups = std::make_unique<mesh::Groups>(*n.peers, n.identity, n.name, std::move(*store));
    groups->relays_changed().subscribe([this](const std::vector<mesh::Groups::GroupRelay>& r) {
      relays_told.push_back(r);
    });
    if (!groups->load()) std::abort();
    groups->register_methods();
    groups->add_routes(router);
  }
  SimNode& node;
  std::unique_ptr<mesh::Groups> groups;
  api::Router router;
  std::vector<std::vector<mesh::Groups::GroupRelay>> relays_told;  // each relays_changed, in order
};

struct World {
  explicit World(uint64_t seed, int members) : net(seed) {
    owner = add("owner");
    for (int i = 0; i < members; ++i) add("m" + std::to_string(i));
  }
  ~World() { net.stop(); }  // before the services the link's handlers point to

  GroupNode* add(const std::string& name) {
    nodes.push_back(std::make_unique<GroupNode>(net.add_node(name)));
    return nodes.back().get();
  }
  GroupNode& at(int i) { return *nodes.at(i + 1); }

  // A local API request as the CLI sends it; the answer's JSON (an error
  // answer fails the test where it is asserted).
  Result<json> api(GroupNode& n, const std::string& method, const std::string& path, const json& body) {
    api::Request req;
    req.method = method;
    auto q = path.find('?');
    req.path = path.substr(0, q);
    if (q != std::string::npos) req.query = path.substr(q + 1);
    req.body = body.is_null() ? "" : body.dump();
    std::optional<api::Response> got;
    n.router.dispatch(req, [&](api::Response r) { got = std::move(r); });
    net.run_until([&] { return got.has_value(); });
    if (!got) return make_error(ErrorCode::kUnavailable, path + " was not answered");
    if (got->status != 200) return make_error(ErrorCode::kInternal, path + ": " + got->body);
    return json::parse(got->body);
  }
  // The owner invites `n` into the group and `n` redeems the link.
  Status invite(GroupNode& n) {
    auto link = api(*owner, "POST", "/v1/groups/invite", {{"group", "lab"}});
    if (!link) return std::move(link).error();
    auto joined = net.redeem(n.node, owner->node, link->value("id", ""));
    if (!joined) return std::move(joined).error();
    if (joined->size() != 1) return make_error(ErrorCode::kInternal, n.node.name + " joined " + joined->dump());
    net.settle();
    return ok_status();
  }
  // What `n` holds for the group, encoded as signed ("" when it is in none).
  std::string held(GroupNode& n) {
    auto m = n.groups->membership("lab");
    return m ? mesh::encode_membership(*m) : "";
  }
  uint64_t version(GroupNode& n) {
    auto m = n.groups->membership("lab");
    return m ? m->version : 0;
  }

  SimNet net;
  std::vector<std::unique_ptr<GroupNode>> nodes;
  GroupNode* owner = nullptr;
};

TEST(GroupSyncSim, InvitedMembersEndWithTheOwnersSignedList) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w(seed, 3);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups", {{"name", "lab"}}).ok());
    for (int i = 0; i < 3; ++i) {
      auto st = w.invite(w.at(i));
      ASSERT_TRUE(st.ok()) << st.error().to_string();
    }
    EXPECT_EQ(w.version(*w.owner), 4u) << "created, then one version per member";
    auto members = w.owner->groups->membership("lab");
    ASSERT_TRUE(members.ok());
    EXPECT_EQ(members->members.size(), 4u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(w.held(w.at(i)), w.held(*w.owner)) << w.at(i).node.name << " holds another list";
    }
    // What `yonder group members` shows on a member: everyone, online.
    auto shown = w.api(w.at(0), "GET", "/v1/groups/members?group=lab", nullptr);
    ASSERT_TRUE(shown.ok()) << shown.error().to_string();
    EXPECT_EQ((*shown)["members"].size(), 4u);
    EXPECT_EQ((*shown)["version"], 4);
  }
}

TEST(GroupSyncSim, AMemberCutOffDuringChangesCatchesUpWhenItsSessionReturns) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w(seed, 3);
    GroupNode& a = w.at(0);
    GroupNode& b = w.at(1);
    GroupNode& c = w.at(2);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups", {{"name", "lab"}}).ok());
    for (GroupNode* n : {&a, &b, &c}) ASSERT_TRUE(w.invite(*n).ok());
    ASSERT_EQ(w.version(c), 4u);

    w.net.cut(w.owner->node, c.node);
    auto removed = w.api(*w.owner, "POST", "/v1/groups/remove", {{"group", "lab"}, {"member", b.node.id()}});
    ASSERT_TRUE(removed.ok()) << removed.error().to_string();
    GroupNode* d = w.add("late");
    ASSERT_TRUE(w.invite(*d).ok());
    ASSERT_EQ(w.version(*w.owner), 6u);

    EXPECT_EQ(w.held(a), w.held(*w.owner)) << "a member in reach has the newest list";
    EXPECT_EQ(w.held(*d), w.held(*w.owner)) << "the newcomer has it";
    EXPECT_EQ(w.held(b), "") << "the removed member heard of it and dropped the group";
    EXPECT_EQ(w.version(c), 4u) << "the cut-off member cannot have heard";

    ASSERT_TRUE(w.net.connect(w.owner->node, c.node).ok());
    w.net.settle();
    EXPECT_EQ(w.held(c), w.held(*w.owner)) << "back in reach, the member caught up";
    auto mine = c.groups->membership("lab");
    ASSERT_TRUE(mine.ok());
    EXPECT_FALSE(mesh::is_member(*mine, b.node.key()));
    EXPECT_TRUE(mesh::is_member(*mine, d->node.key()));
    EXPECT_TRUE(mesh::membership_signature_valid(*mine));
    EXPECT_EQ(mine->signer, w.owner->node.key());
  }
}

// Gossip rides the links members have: a member cut off from the owner but
// paired with another member hears of a change through it, at once.
TEST(GroupSyncSim, AChangeReachesAMemberCutOffFromTheOwnerThroughAnotherMember) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w(seed, 3);
    GroupNode& a = w.at(0);
    GroupNode& b = w.at(1);
    GroupNode& c = w.at(2);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups", {{"name", "lab"}}).ok());
    for (GroupNode* n : {&a, &b, &c}) ASSERT_TRUE(w.invite(*n).ok());
    Scope nothing;
    nothing.capabilities = 0;
    ASSERT_TRUE(w.net.pair(a.node, c.node, nothing).ok());
    w.net.settle();

    w.net.cut(w.owner->node, c.node);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups/remove", {{"group", "lab"}, {"member", b.node.id()}}).ok());
    w.net.settle();
    EXPECT_EQ(w.version(c), 5u);
    EXPECT_EQ(w.held(c), w.held(*w.owner)) << "a pushed the owner's list on to c";
    EXPECT_EQ(w.held(b), "");
  }
}

// A relay the owner names reaches every member with the list, the one cut
// off too once it is back; each member's link is told once per change.
TEST(GroupSyncSim, TheGroupsRelaysReachEveryMemberAndEachIsToldOncePerChange) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w(seed, 3);
    GroupNode& a = w.at(0);
    GroupNode& c = w.at(2);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups", {{"name", "lab"}}).ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(w.invite(w.at(i)).ok());
    auto relay_key = Identity::generate();
    ASSERT_TRUE(relay_key.ok());
    std::string pinned = "203.0.113.7:7871@" + relay_key->node_id().to_string();
    w.net.cut(w.owner->node, c.node);
    auto named = w.api(*w.owner, "POST", "/v1/groups/relay", {{"group", "lab"}, {"add", pinned}});
    ASSERT_TRUE(named.ok()) << named.error().to_string();
    w.net.settle();
    for (GroupNode* n : {w.owner, &a, &w.at(1)}) {
      ASSERT_EQ(n->relays_told.size(), 2u) << n->node.name << ": at load (none), then the relay";
      EXPECT_TRUE(n->relays_told[0].empty());
      ASSERT_EQ(n->relays_told[1].size(), 1u);
      EXPECT_EQ(n->relays_told[1][0].relay.text(), pinned);
      EXPECT_EQ(n->relays_told[1][0].group, "lab");
    }
    EXPECT_EQ(c.relays_told.size(), 1u) << "cut off: not told yet";
    ASSERT_TRUE(w.net.connect(w.owner->node, c.node).ok());
    w.net.settle();
    ASSERT_EQ(c.relays_told.size(), 2u);
    EXPECT_EQ(c.relays_told[1][0].relay.text(), pinned);

    // A change that keeps the relays tells nobody; taking it out tells everyone.
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups/remove", {{"group", "lab"}, {"member", w.at(1).node.id()}}).ok());
    w.net.settle();
    EXPECT_EQ(a.relays_told.size(), 2u);
    ASSERT_EQ(w.at(1).relays_told.size(), 3u) << "the removed member drops the group and its relay";
    EXPECT_TRUE(w.at(1).relays_told[2].empty());
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups/relay", {{"group", "lab"}, {"remove", pinned}}).ok());
    w.net.settle();
    for (GroupNode* n : {w.owner, &a, &c}) {
      ASSERT_EQ(n->relays_told.size(), 3u) << n->node.name;
      EXPECT_TRUE(n->relays_told[2].empty());
    }
  }
}

// An old list replayed to a member that holds a newer one is answered with
// the newer one (a node back from offline catches up), never taken.
TEST(GroupSyncSim, AStaleListIsAnsweredWithTheNewerOne) {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w(seed, 2);
    ASSERT_TRUE(w.api(*w.owner, "POST", "/v1/groups", {{"name", "lab"}}).ok());
    ASSERT_TRUE(w.invite(w.at(0)).ok());
    std::string old = w.held(w.at(0));
    ASSERT_TRUE(w.invite(w.at(1)).ok());
    std::optional<Result<json>> got;
    w.at(1).node.peers->service().call(w.at(0).node.key(), {}, "group.membership", {{"membership", old}},
                                       [&](Result<json> r) { got = std::move(r); });
    // at(1) and at(0) are not paired: there is no session to carry it.
    w.net.run_until([&] { return got.has_value(); });
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(got->ok());

    got.reset();
    w.owner->node.peers->service().call(w.at(0).node.key(), {}, "group.membership", {{"membership", old}},
                                        [&](Result<json> r) { got = std::move(r); });
    w.net.run_until([&] { return got.has_value(); });
    ASSERT_TRUE(got.has_value() && got->ok()) << (got && !got->ok() ? got->error().to_string() : "no answer");
    EXPECT_EQ((**got)["verdict"], "stale");
    EXPECT_EQ((**got)["membership"], w.held(*w.owner));
    EXPECT_EQ(w.held(w.at(0)), w.held(*w.owner));
  }
}

}  // namespace
}  // namespace yonder::sim
