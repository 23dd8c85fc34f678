// Group edits (mesh/core/group_edit.h): each edit is the next version, signable,
// and accepted by a node holding the previous one exactly when the signer
// may sign it.
#include <gtest/gtest.h>

#include "mesh/core/group_edit.h"

namespace yonder::mesh {
namespace {

Identity make_identity() {
  auto id = Identity::generate();
  EXPECT_TRUE(id.ok());
  return std::move(*id);
}

constexpr const char* kGroupId = "00112233445566778899aabbccddeeff";

TEST(GroupEdit, NewGroupListsTheOwnerAsAdminWithItsLabels) {
  Identity owner = make_identity();
  auto m = new_group(kGroupId, "lab", owner.public_key(), {{"site", "lab2"}});
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->version, 1u);
  ASSERT_EQ(m->members.size(), 1u);
  EXPECT_EQ(m->members[0].role, MemberRole::kAdmin);
  EXPECT_EQ(m->members[0].labels.at("site"), "lab2");
  sign_membership(*m, owner);
  EXPECT_EQ(judge_membership_update(nullptr, owner.public_key(), *m), MembershipVerdict::kAccept);
  // The signed list survives its codec.
  auto back = decode_membership(encode_membership(*m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *m);
}

TEST(GroupEdit, BadNamesIdsAndLabelsAreRefused) {
  Identity owner = make_identity();
  EXPECT_FALSE(new_group(kGroupId, "", owner.public_key(), {}).ok());
  EXPECT_FALSE(new_group(kGroupId, "a b", owner.public_key(), {}).ok());
  EXPECT_FALSE(new_group(kGroupId, std::string(65, 'a'), owner.public_key(), {}).ok());
  EXPECT_FALSE(new_group("XYZ", "lab", owner.public_key(), {}).ok());
  EXPECT_FALSE(new_group(kGroupId, "lab", owner.public_key(), {{"bad key", "v"}}).ok());
  EXPECT_FALSE(new_group(kGroupId, "lab", owner.public_key(), {{"k", "bad value"}}).ok());
  EXPECT_FALSE(parse_label("novalue").ok());
  auto l = parse_label("gpu=rtx4090");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->first, "gpu");
  EXPECT_EQ(l->second, "rtx4090");
}

TEST(GroupEdit, AddRemoveAndLabelEachMakeTheNextVersion) {
  Identity owner = make_identity(), b = make_identity(), c = make_identity();
  auto v1 = new_group(kGroupId, "lab", owner.public_key(), {});
  ASSERT_TRUE(v1.ok());
  sign_membership(*v1, owner);
  auto v2 = with_member(*v1, b.public_key());
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->version, 2u);
  EXPECT_TRUE(v2->signature.empty());
  EXPECT_TRUE(is_member(*v2, b.public_key()));
  EXPECT_FALSE(is_admin(*v2, b.public_key()));
  EXPECT_EQ(with_member(*v2, b.public_key()).error().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(v1->version, 1u);  // the held list is untouched
  sign_membership(*v2, owner);
  EXPECT_EQ(judge_membership_update(&*v1, owner.public_key(), *v2), MembershipVerdict::kAccept);

  auto v3 = with_member(*v2, c.public_key(), {{"gpu", "t4"}});
  ASSERT_TRUE(v3.ok());
  sign_membership(*v3, owner);
  auto v4 = with_label(*v3, c.public_key(), "gpu", "rtx4090");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->members.back().labels.at("gpu"), "rtx4090");
  auto unlabelled = with_label(*v4, c.public_key(), "gpu", "");
  ASSERT_TRUE(unlabelled.ok());
  EXPECT_TRUE(unlabelled->members.back().labels.empty());
  EXPECT_EQ(with_label(*v3, make_identity().public_key(), "gpu", "x").error().code(), ErrorCode::kNotFound);

  auto v5 = without_member(*v3, c.public_key());
  ASSERT_TRUE(v5.ok());
  EXPECT_EQ(v5->version, 4u);
  EXPECT_FALSE(is_member(*v5, c.public_key()));
  EXPECT_EQ(without_member(*v5, c.public_key()).error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(without_member(*v5, owner.public_key()).error().code(), ErrorCode::kPermissionDenied);

  // Signed by a plain member, the removal is refused by a node holding v3.
  sign_membership(*v5, b);
  EXPECT_EQ(judge_membership_update(&*v3, owner.public_key(), *v5), MembershipVerdict::kRejected);
  sign_membership(*v5, owner);
  EXPECT_EQ(judge_membership_update(&*v3, owner.public_key(), *v5), MembershipVerdict::kAccept);
  EXPECT_EQ(judge_membership_update(&*v5, owner.public_key(), *v3), MembershipVerdict::kStale);
}

// The owner promotes b: b's lists are then accepted by nodes holding the
// promotion; once demoted, b's next list is refused.
TEST(GroupEdit, PromotedAdminsSignUntilDemoted) {
  Identity owner = make_identity(), b = make_identity(), c = make_identity();
  auto v1 = new_group(kGroupId, "lab", owner.public_key(), {});
  ASSERT_TRUE(v1.ok());
  auto v2 = with_member(*v1, b.public_key());
  auto v3 = with_member(*v2, c.public_key());
  ASSERT_TRUE(v3.ok());
  auto v4 = with_role(*v3, b.public_key(), MemberRole::kAdmin);
  ASSERT_TRUE(v4.ok()) << v4.error().message();
  EXPECT_EQ(v4->version, 4u);
  EXPECT_TRUE(is_admin(*v4, b.public_key()));
  EXPECT_FALSE(is_admin(*v3, b.public_key()));  // the held list is untouched
  EXPECT_EQ(with_role(*v4, b.public_key(), MemberRole::kAdmin).error().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(with_role(*v4, owner.public_key(), MemberRole::kMember).error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(with_role(*v4, make_identity().public_key(), MemberRole::kAdmin).error().code(), ErrorCode::kNotFound);
  sign_membership(*v4, owner);

  // b, now an admin, removes c: accepted by a node holding v4.
  auto v5 = without_member(*v4, c.public_key());
  ASSERT_TRUE(v5.ok());
  sign_membership(*v5, b);
  EXPECT_EQ(judge_membership_update(&*v4, owner.public_key(), *v5), MembershipVerdict::kAccept);

  // The owner demotes b; b's later list is refused by a node holding the demotion.
  auto v6 = with_role(*v5, b.public_key(), MemberRole::kMember);
  ASSERT_TRUE(v6.ok());
  EXPECT_FALSE(is_admin(*v6, b.public_key()));
  sign_membership(*v6, owner);
  EXPECT_EQ(judge_membership_update(&*v5, owner.public_key(), *v6), MembershipVerdict::kAccept);
  auto v7 = with_label(*v6, b.public_key(), "role", "x");
  ASSERT_TRUE(v7.ok());
  sign_membership(*v7, b);
  EXPECT_EQ(judge_membership_update(&*v6, owner.public_key(), *v7), MembershipVerdict::kRejected);
}

TEST(GroupEdit, AListHoldsAtMostTheCodecsMembers) {
  Identity owner = make_identity();
  auto m = new_group(kGroupId, "big", owner.public_key(), {});
  ASSERT_TRUE(m.ok());
  for (size_t i = 1; i < kMaxGroupMembers; ++i) {
    PeerKey k{};
    k[0] = static_cast<uint8_t>(i >> 8);
    k[1] = static_cast<uint8_t>(i);
    k[2] = 1;
    Member mem;
    mem.id = k;
    m->members.push_back(mem);
  }
  EXPECT_EQ(with_member(*m, make_identity().public_key()).error().code(), ErrorCode::kResourceExhausted);
}

LinkRelay relay_at(const std::string& address, const Identity& relay) { return LinkRelay{address, relay.public_key()}; }

TEST(GroupEdit, RelaysAreAddedWithTheirKeysAndRemovedByAddress) {
  Identity owner = make_identity(), r1 = make_identity(), r2 = make_identity();
  auto v1 = new_group(kGroupId, "lab", owner.public_key(), {});
  ASSERT_TRUE(v1.ok());
  auto v2 = with_relay(*v1, relay_at("203.0.113.7:7871", r1));
  ASSERT_TRUE(v2.ok()) << v2.error().message();
  EXPECT_EQ(v2->version, 2u);
  ASSERT_EQ(v2->relays.size(), 1u);
  EXPECT_TRUE(v1->relays.empty());  // the held list is not changed
  // The same address again, even with another key: remove it first.
  auto again = with_relay(*v2, relay_at("203.0.113.7:7871", r2));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kAlreadyExists);
  // Without a key members could not check the relay: refused, saying the form.
  auto keyless = with_relay(*v2, LinkRelay{"198.51.100.2:7871", std::nullopt});
  ASSERT_FALSE(keyless.ok());
  EXPECT_NE(keyless.error().message().find("HOST:PORT@NODE_ID"), std::string::npos) << keyless.error().message();
  // At most kMaxGroupRelays.
  Membership m = *v2;
  for (int i = 2; i <= static_cast<int>(kMaxGroupRelays); ++i) {
    auto next = with_relay(m, relay_at("198.51.100." + std::to_string(i) + ":7871", r2));
    ASSERT_TRUE(next.ok()) << next.error().message();
    m = *next;
  }
  auto full = with_relay(m, relay_at("198.51.100.99:7871", r2));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted);
  // Removed by address; an unknown address is kNotFound.
  auto fewer = without_relay(m, "203.0.113.7:7871");
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->relays.size(), kMaxGroupRelays - 1);
  EXPECT_EQ(fewer->version, m.version + 1);
  EXPECT_EQ(without_relay(m, "192.0.2.1:1").error().code(), ErrorCode::kNotFound);
  // Signed by the owner, the list with its relays is accepted and survives the codec.
  sign_membership(*fewer, owner);
  EXPECT_EQ(judge_membership_update(&m, owner.public_key(), *fewer), MembershipVerdict::kAccept);
  auto back = decode_membership(encode_membership(*fewer));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->relays, fewer->relays);
}

}  // namespace
}  // namespace yonder::mesh
