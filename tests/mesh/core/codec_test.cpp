// The mesh codecs: round trips, signatures, bounds, membership authorisation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "crypto/node_id.h"
#include "mesh/core/lease.h"
#include "mesh/core/membership.h"
#include "mesh_test_util.h"

namespace yonder::mesh {
namespace {

using testing::identity;
constexpr UnixMs kNow = 1'800'000'000'000;

TEST(AdvertisementCodec, RoundTripsAndVerifies) {
  auto id = identity(1);
  Advertisement ad = testing::sample_ad(id, kNow);
  auto text = encode_advertisement(ad);
  auto back = decode_advertisement(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, ad);
  EXPECT_TRUE(verify_advertisement(*back).ok());
  EXPECT_TRUE(advertisement_fresh(*back, kNow + 1000));
  EXPECT_FALSE(advertisement_fresh(*back, kNow + 60'000));
  EXPECT_FALSE(advertisement_fresh(*back, kNow - 2 * kMaxClockSkewMs));
}

TEST(AdvertisementCodec, TamperingBreaksTheSignature) {
  auto id = identity(1);
  Advertisement ad = testing::sample_ad(id, kNow);
  ad.gpus[1].leased = false;  // claims a free device it did not sign
  EXPECT_EQ(verify_advertisement(ad).error().code(), ErrorCode::kPermissionDenied);
  Advertisement other = testing::sample_ad(id, kNow);
  other.provider = identity(2).public_key();
  EXPECT_FALSE(verify_advertisement(other).ok());
}

TEST(AdvertisementCodec, RefusesMalformedAndOversized) {
  auto id = identity(1);
  std::string good = encode_advertisement(testing::sample_ad(id, kNow));
  EXPECT_FALSE(decode_advertisement("").ok());
  EXPECT_FALSE(decode_advertisement("[]").ok());
  EXPECT_FALSE(decode_advertisement(good.substr(0, good.size() - 1)).ok());
  std::string neg = good;
  neg.replace(neg.find("\"queue_depth\":2"), 15, "\"queue_depth\":-2");
  EXPECT_FALSE(decode_advertisement(neg).ok());
  std::string big(kMaxAdvertisementBytes + 1, ' ');
  EXPECT_EQ(decode_advertisement(big).error().code(), ErrorCode::kResourceExhausted);
  std::string ctrl = good;
  ctrl.replace(ctrl.find("\"docker\""), 8, "\"dock\\u0001\"");
  EXPECT_FALSE(decode_advertisement(ctrl).ok());
}

TEST(AdvertisementCodec, WindowLongerThanAnHourIsRefused) {
  auto id = identity(1);
  Advertisement ad = testing::sample_ad(id, kNow);
  ad.expires_at_ms = kNow + kMaxAdvertisementTtlMs + 1;
  sign_advertisement(ad, id);
  EXPECT_FALSE(verify_advertisement(ad).ok());
}

Membership group(const Identity& signer, uint64_t version, std::vector<Member> members, const PeerKey& owner) {
  Membership m;
  m.group_id = "0123456789abcdef0123456789abcdef";
  m.name = "lab";
  m.version = version;
  m.owner = owner;
  m.members = std::move(members);
  sign_membership(m, signer);
  return m;
}

Member member(uint32_t n, MemberRole role = MemberRole::kMember) {
  Member m;
  m.id = identity(n).public_key();
  m.role = role;
  m.labels = {{"gpu", "rtx4090"}};
  return m;
}

TEST(MembershipCodec, RoundTrips) {
  auto owner = identity(10);
  auto m = group(owner, 1, {member(11), member(12, MemberRole::kAdmin)}, owner.public_key());
  auto back = decode_membership(encode_membership(m));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, m);
  EXPECT_TRUE(membership_signature_valid(*back));
  EXPECT_TRUE(is_admin(m, identity(12).public_key()));
  EXPECT_FALSE(is_admin(m, identity(11).public_key()));
}

TEST(MembershipCodec, RelaysAreSignedAndAbsentWhenThereAreNone) {
  auto owner = identity(10);
  auto m = group(owner, 1, {member(11)}, owner.public_key());
  // A list without relays encodes (and signs) as before relays existed.
  EXPECT_EQ(encode_membership(m).find("relays"), std::string::npos);
  m.relays = {LinkRelay{"203.0.113.7:7871", identity(20).public_key()}};
  sign_membership(m, owner);
  auto back = decode_membership(encode_membership(m));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, m);
  EXPECT_TRUE(membership_signature_valid(*back));
  // The relays are under the signature: another relay breaks it.
  Membership swapped = *back;
  swapped.relays[0].key = identity(21).public_key();
  EXPECT_FALSE(membership_signature_valid(swapped));
}

TEST(MembershipCodec, RefusesKeylessTooManyAndRepeatedRelays) {
  using json = nlohmann::json;
  auto owner = identity(10);
  auto base = group(owner, 1, {member(11)}, owner.public_key());
  std::string key = NodeId(identity(20).public_key()).to_string();
  auto with = [&](json relays) {
    json j = json::parse(encode_membership(base));
    j["relays"] = std::move(relays);
    return decode_membership(j.dump());
  };
  EXPECT_TRUE(with(json::array({"203.0.113.7:7871@" + key})).ok());
  EXPECT_FALSE(with(json::array({"203.0.113.7:7871"})).ok());  // no key
  EXPECT_FALSE(with(json::array({"203.0.113.7:7871@" + key, "203.0.113.7:7871@" + key})).ok());
  EXPECT_FALSE(with(json::array()).ok());
  EXPECT_FALSE(with(json::array({"no port@" + key})).ok());
  EXPECT_FALSE(with(json::array({7871})).ok());
  EXPECT_FALSE(with("203.0.113.7:7871@" + key).ok());
  json five = json::array();
  for (int i = 1; i <= 5; ++i) five.push_back("198.51.100." + std::to_string(i) + ":7871@" + key);
  auto refused = with(five);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("1 to 4"), std::string::npos) << refused.error().message();
}

TEST(MembershipCodec, RefusesDuplicatesAndBadGroupIds) {
  auto owner = identity(10);
  auto m = group(owner, 1, {member(11), member(11)}, owner.public_key());
  EXPECT_FALSE(decode_membership(encode_membership(m)).ok());
  auto g = group(owner, 1, {member(11)}, owner.public_key());
  g.group_id = "XYZ";
  EXPECT_FALSE(decode_membership(encode_membership(g)).ok());
}

TEST(MembershipUpdate, NewerFromAuthorisedSignerReplacesAndRemoves) {
  auto owner = identity(10), admin = identity(12), plain = identity(11), outsider = identity(99);
  PeerKey o = owner.public_key();
  auto v1 = group(owner, 1, {member(11), member(12, MemberRole::kAdmin), member(13)}, o);
  EXPECT_EQ(judge_membership_update(nullptr, o, v1), MembershipVerdict::kAccept);
  // The first version must come from the owner.
  auto by_admin_first = group(admin, 1, {member(12, MemberRole::kAdmin)}, o);
  EXPECT_EQ(judge_membership_update(nullptr, o, by_admin_first), MembershipVerdict::kRejected);
  // An admin removes member 13.
  auto v2 = group(admin, 2, {member(11), member(12, MemberRole::kAdmin)}, o);
  EXPECT_EQ(judge_membership_update(&v1, o, v2), MembershipVerdict::kAccept);
  EXPECT_FALSE(is_member(v2, identity(13).public_key()));
  // A plain member or an outsider cannot sign, not even to promote itself.
  auto by_member = group(plain, 3, {member(11, MemberRole::kAdmin)}, o);
  EXPECT_EQ(judge_membership_update(&v2, o, by_member), MembershipVerdict::kRejected);
  auto by_outsider = group(outsider, 3, {member(99, MemberRole::kAdmin)}, o);
  EXPECT_EQ(judge_membership_update(&v2, o, by_outsider), MembershipVerdict::kRejected);
  // Old versions are stale; a forged owner field is refused.
  EXPECT_EQ(judge_membership_update(&v2, o, v1), MembershipVerdict::kStale);
  auto other_owner = group(outsider, 5, {}, outsider.public_key());
  EXPECT_EQ(judge_membership_update(&v2, o, other_owner), MembershipVerdict::kRejected);
  // A bad signature is refused.
  auto forged = v2;
  forged.version = 9;
  EXPECT_EQ(judge_membership_update(&v2, o, forged), MembershipVerdict::kRejected);
}

TEST(MembershipUpdate, SameVersionConflictResolvesTheSameWayEverywhere) {
  auto owner = identity(10), admin = identity(12);
  PeerKey o = owner.public_key();
  auto v1 = group(owner, 1, {member(12, MemberRole::kAdmin)}, o);
  auto a = group(owner, 2, {member(12, MemberRole::kAdmin), member(20)}, o);
  auto b = group(admin, 2, {member(12, MemberRole::kAdmin), member(21)}, o);
  const Membership& winner = a.signature < b.signature ? b : a;
  const Membership& loser = a.signature < b.signature ? a : b;
  EXPECT_EQ(judge_membership_update(&loser, o, winner), MembershipVerdict::kAccept);
  EXPECT_EQ(judge_membership_update(&winner, o, loser), MembershipVerdict::kStale);
  EXPECT_EQ(judge_membership_update(&v1, o, winner), MembershipVerdict::kAccept);
}

TEST(LeaseCodec, EveryKindRoundTrips) {
  std::vector<LeaseMessage> all(5);
  all[0].kind = LeaseKind::kOffer;
  all[0].request_id = 7;
  all[0].gpus = 2;
  all[0].vram_bytes = 24ull << 30;
  all[0].min_capability = 800;
  all[0].term_ms = 30'000;
  all[0].timeout_ms = 2'000;
  all[1].kind = LeaseKind::kAccept;
  all[1].request_id = 7;
  all[1].lease_id = 3;
  all[1].devices = {0, 2};
  all[1].expires_at_ms = kNow;
  all[2].kind = LeaseKind::kRefuse;
  all[2].request_id = 7;
  all[2].refuse_reason = RefuseReason::kBusy;
  all[2].retry_after_ms = 500;
  all[3].kind = LeaseKind::kRenew;
  all[3].lease_id = 3;
  all[3].term_ms = 30'000;
  all[4].kind = LeaseKind::kRelease;
  all[4].lease_id = 3;
  all[4].release_reason = ReleaseReason::kExpired;
  for (const auto& m : all) {
    auto back = decode_lease_message(encode_lease_message(m));
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, m);
  }
  EXPECT_FALSE(decode_lease_message(R"({"kind":"offer","request_id":1,"gpus":0,"vram_bytes":0,)"
                                    R"("min_capability":0,"term_ms":1,"timeout_ms":1})")
                   .ok());
  EXPECT_FALSE(decode_lease_message(R"({"kind":"accept","request_id":1,"lease_id":1,"devices":[1,1],)"
                                    R"("expires_at_ms":5})")
                   .ok());
  EXPECT_FALSE(decode_lease_message(R"({"kind":"steal"})").ok());
}

TEST(ReceiptCodec, SignedCountersignedRoundTripsAndVerifies) {
  auto p = identity(1), c = identity(2);
  Receipt r = testing::receipt(p, c, "job-1", 3600, kNow);
  EXPECT_TRUE(verify_receipt(r).ok());
  auto back = decode_receipt(encode_receipt(r));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, r);
  EXPECT_TRUE(verify_receipt(*back).ok());
}

TEST(ReceiptCodec, BothSignaturesAreChecked) {
  auto p = identity(1), c = identity(2), m = identity(3);
  Receipt r = testing::receipt(p, c, "job-1", 3600, kNow);
  Receipt inflated = r;
  inflated.gpu_seconds = 36000;
  EXPECT_FALSE(verify_receipt(inflated).ok());
  Receipt uncountersigned = r;
  uncountersigned.consumer_signature.clear();
  EXPECT_FALSE(verify_receipt(uncountersigned).ok());
  auto back = decode_receipt(encode_receipt(uncountersigned));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->consumer_signature.empty());
  // Only the named consumer can countersign, and only a valid provider signature.
  Receipt fresh = r;
  fresh.consumer_signature.clear();
  EXPECT_FALSE(countersign_receipt(fresh, m).ok());
  fresh.gpu_seconds += 1;
  EXPECT_FALSE(countersign_receipt(fresh, c).ok());
  // A countersignature does not move to another provider signature.
  Receipt other = testing::receipt(p, c, "job-2", 3600, kNow);
  other.consumer_signature = r.consumer_signature;
  EXPECT_FALSE(verify_receipt(other).ok());
}

TEST(ReceiptCodec, RefusesOutOfRangeFields) {
  auto p = identity(1), c = identity(2);
  std::string good = encode_receipt(testing::receipt(p, c, "job-1", 10, kNow));
  std::string bad_hash = good;
  bad_hash.replace(bad_hash.find("\"output_hash\":\"") + 15, 1, "G");
  EXPECT_FALSE(decode_receipt(bad_hash).ok());
  std::string big_exit = good;
  big_exit.replace(big_exit.find("\"exit_status\":0"), 15, "\"exit_status\":4294967296");
  EXPECT_FALSE(decode_receipt(big_exit).ok());
  std::string neg_exit = good;
  neg_exit.replace(neg_exit.find("\"exit_status\":0"), 15, "\"exit_status\":-9");
  auto r = decode_receipt(neg_exit);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->exit_status, -9);
}

}  // namespace
}  // namespace yonder::mesh
