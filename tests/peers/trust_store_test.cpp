#include "peers/trust_store.h"

#include <gtest/gtest.h>

#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::peers {
namespace {

class TrustStoreTest : public ::testing::Test {
 protected:
  TrustStoreTest() {
    auto db = store::Database::open(path_);
    EXPECT_TRUE(db.ok());
    EXPECT_TRUE(store::migrate(*db).ok());
  }
  TrustStore open() { return TrustStore::open(path_).value(); }
  LinkRecord link(uint8_t tag, int uses, int64_t expires_at, LinkSecret& secret) {
    LinkRecord l;
    l.id.fill(tag);
    secret.fill(static_cast<uint8_t>(tag + 1));
    l.secret_hash = hash_link_secret(secret);
    l.scope.capabilities = static_cast<uint8_t>(Capability::kExec);
    l.created_at = 1000;
    l.expires_at = expires_at;
    l.uses_total = l.uses_left = uses;
    return l;
  }
  PeerRecord peer(uint8_t tag) {
    PeerRecord p;
    p.key.fill(tag);
    p.name = "peer" + std::to_string(tag);
    return p;
  }

  testing::TempDir dir_;
  std::string path_ = dir_ / "state.db";
};

TEST_F(TrustStoreTest, RedeemPinsWithTheLinksScopeAndSpendsAUse) {
  TrustStore ts = open();
  LinkSecret secret{};
  ASSERT_TRUE(ts.add_link(link(1, 1, 5000, secret)).ok());
  EXPECT_TRUE(ts.any_redeemable(2000));
  EXPECT_EQ(ts.find(peer(9).key), nullptr);
  auto r = ts.redeem(link(1, 1, 5000, secret).id, secret, peer(9), 2000);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_NE(ts.find(peer(9).key), nullptr);
  EXPECT_TRUE(ts.find(peer(9).key)->grant.allows(Capability::kExec));
  EXPECT_FALSE(ts.find(peer(9).key)->grant.allows(Capability::kRun));
  // Persisted before it was acknowledged: a fresh store sees it.
  TrustStore again = open();
  ASSERT_NE(again.find(peer(9).key), nullptr);
  EXPECT_EQ(again.links()->front().uses_left, 0);
  EXPECT_EQ(again.links()->front().state(2000), "used");
}

TEST_F(TrustStoreTest, ReplayWrongSecretExpiredRevokedAreRefused) {
  TrustStore ts = open();
  LinkSecret s1{}, s2{}, s3{};
  LinkRecord used = link(1, 1, 5000, s1);
  LinkRecord expired = link(2, 5, 1500, s2);
  LinkRecord revoked = link(3, 5, 5000, s3);
  ASSERT_TRUE(ts.add_link(used).ok());
  ASSERT_TRUE(ts.add_link(expired).ok());
  ASSERT_TRUE(ts.add_link(revoked).ok());
  ASSERT_TRUE(ts.redeem(used.id, s1, peer(7), 2000).ok());

  auto replay = ts.redeem(used.id, s1, peer(8), 2001);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.error().message().find("used already"), std::string::npos);

  LinkSecret wrong = s3;
  wrong[0] ^= 1;
  auto bad_secret = ts.redeem(revoked.id, wrong, peer(8), 2001);
  ASSERT_FALSE(bad_secret.ok());
  EXPECT_EQ(bad_secret.error().code(), ErrorCode::kNotFound);

  auto late = ts.redeem(expired.id, s2, peer(8), 2001);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message().find("expired"), std::string::npos);

  ASSERT_TRUE(ts.revoke_link(revoked.id, 2002).ok());
  EXPECT_FALSE(ts.revoke_link(revoked.id, 2003).ok());
  auto rev = ts.redeem(revoked.id, s3, peer(8), 2004);
  ASSERT_FALSE(rev.ok());
  EXPECT_NE(rev.error().message().find("revoked"), std::string::npos);
  EXPECT_EQ(ts.find(peer(8).key), nullptr);
  EXPECT_FALSE(ts.redeem(LinkIdBytes{}, s1, peer(8), 2004).ok());
}

TEST_F(TrustStoreTest, DenyRemovesThePinAndSurvivesRestart) {
  TrustStore ts = open();
  PeerRecord p = peer(4);
  p.grant.capabilities = static_cast<uint8_t>(Capability::kRun);
  ASSERT_TRUE(ts.upsert(p).ok());
  ASSERT_NE(ts.find(p.key), nullptr);
  EXPECT_EQ(ts.find_by_text("peer4"), ts.find(p.key));
  EXPECT_EQ(ts.find_by_text(p.id().to_string()), ts.find(p.key));
  ASSERT_TRUE(ts.deny(p.key, 3000).ok());
  EXPECT_EQ(ts.find(p.key), nullptr);
  TrustStore again = open();
  EXPECT_EQ(again.find(p.key), nullptr);
  EXPECT_EQ(again.peers().size(), 1u);
  EXPECT_TRUE(again.peers().front().denied());
}

TEST_F(TrustStoreTest, ADeniedPeerCannotPairAgainWithAnOldMultiUseLink) {
  TrustStore ts = open();
  LinkSecret s1{}, s2{}, s3{};
  LinkRecord redeemed = link(1, 5, 9000, s1);  // multi-use, uses left after the first pairing
  LinkRecord other_old = link(2, 5, 9000, s2);  // made before the deny, never used by this peer
  ASSERT_TRUE(ts.add_link(redeemed).ok());
  ASSERT_TRUE(ts.add_link(other_old).ok());
  ASSERT_TRUE(ts.redeem(redeemed.id, s1, peer(4), 2000).ok());
  ASSERT_TRUE(ts.deny(peer(4).key, 3000).ok());

  auto again = ts.redeem(redeemed.id, s1, peer(4), 3001);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("revoked"), std::string::npos) << again.error().message();
  auto links = ts.links();
  ASSERT_TRUE(links.ok());
  for (const auto& l : *links) {  // deny revoked the link it redeemed, and only that one
    EXPECT_EQ(l.state(3001), l.id == redeemed.id ? "revoked" : "active") << l.id_text();
  }
  auto old = ts.redeem(other_old.id, s2, peer(4), 3002);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ts.find(peer(4).key), nullptr);
  EXPECT_TRUE(open().peers().front().denied());  // and after a restart

  LinkRecord fresh = link(3, 1, 9000, s3);
  fresh.created_at = 3500;  // the operator's explicit choice, after the deny
  ASSERT_TRUE(ts.add_link(fresh).ok());
  auto paired = ts.redeem(fresh.id, s3, peer(4), 3600);
  ASSERT_TRUE(paired.ok()) << paired.error().to_string();
  EXPECT_NE(ts.find(peer(4).key), nullptr);
}

TEST_F(TrustStoreTest, AllowLiftsADenyWithTheOldGrantWhileTheOldLinkStaysRevoked) {
  TrustStore ts = open();
  LinkSecret s1{};
  LinkRecord redeemed = link(1, 5, 9000, s1);
  ASSERT_TRUE(ts.add_link(redeemed).ok());
  ASSERT_TRUE(ts.redeem(redeemed.id, s1, peer(4), 2000).ok());
  Scope grant = ts.find(peer(4).key)->grant;
  ASSERT_TRUE(ts.deny(peer(4).key, 3000).ok());
  EXPECT_EQ(ts.find(peer(4).key), nullptr);
  ASSERT_NE(ts.find_any_by_text(peer(4).id().to_string()), nullptr) << "a denied peer is still found for allow";
  ASSERT_TRUE(ts.allow(peer(4).key).ok());
  ASSERT_NE(ts.find(peer(4).key), nullptr);
  EXPECT_EQ(ts.find(peer(4).key)->grant.capabilities, grant.capabilities);
  EXPECT_FALSE(open().peers().front().denied()) << "and after a restart";
  auto again = ts.redeem(redeemed.id, s1, peer(4), 3100);
  ASSERT_FALSE(again.ok()) << "the link the peer redeemed stays revoked";
  EXPECT_EQ(ts.allow(peer(9).key).error().code(), ErrorCode::kNotFound);
}

TEST_F(TrustStoreTest, ARedeemDoesNotWidenANarrowedScope) {
  TrustStore ts = open();
  LinkSecret s1{}, s2{};
  LinkRecord wide = link(1, 5, 9000, s1);
  wide.scope.capabilities = static_cast<uint8_t>(Capability::kRun) | static_cast<uint8_t>(Capability::kExec) |
                            static_cast<uint8_t>(Capability::kFiles);
  wide.scope.gpus = 4;
  ASSERT_TRUE(ts.add_link(wide).ok());
  ASSERT_TRUE(ts.redeem(wide.id, s1, peer(6), 2000).ok());
  Scope narrowed = wide.scope;
  narrowed.capabilities = static_cast<uint8_t>(Capability::kExec);  // yonder scope PEER --remove run,files
  narrowed.gpus = 1;
  ASSERT_TRUE(ts.set_grant(peer(6).key, narrowed).ok());

  ASSERT_TRUE(ts.redeem(wide.id, s1, peer(6), 2100).ok());  // the same old link, uses left
  LinkRecord other = link(2, 1, 9000, s2);
  other.scope = wide.scope;
  ASSERT_TRUE(ts.add_link(other).ok());
  ASSERT_TRUE(ts.redeem(other.id, s2, peer(6), 2200).ok());
  const PeerRecord* p = ts.find(peer(6).key);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->grant.allows(Capability::kRun));
  EXPECT_FALSE(p->grant.allows(Capability::kFiles));
  EXPECT_TRUE(p->grant.allows(Capability::kExec));
  EXPECT_EQ(p->grant.gpus, 1);
}

TEST_F(TrustStoreTest, ALinkMadeToReplaceTheScopeWidensItOnlyWhenTheOperatorSaidSo) {
  TrustStore ts = open();
  LinkSecret s1{}, s2{};
  LinkRecord first = link(1, 1, 9000, s1);
  first.scope.capabilities = static_cast<uint8_t>(Capability::kExec);
  first.scope.gpus = 1;
  ASSERT_TRUE(ts.add_link(first).ok());
  ASSERT_TRUE(ts.redeem(first.id, s1, peer(7), 2000).ok());

  LinkRecord wider = link(2, 1, 9000, s2);
  wider.scope.capabilities = static_cast<uint8_t>(Capability::kRun) | static_cast<uint8_t>(Capability::kFiles);
  wider.scope.gpus = 3;
  wider.replaces_scope = true;  // yonder share --replace-scope
  ASSERT_TRUE(ts.add_link(wider).ok());
  auto links = ts.links();
  ASSERT_TRUE(links.ok());
  ASSERT_EQ(links->size(), 2u);
  EXPECT_TRUE((*links)[0].replaces_scope || (*links)[1].replaces_scope) << "the choice is stored with the link";
  ASSERT_TRUE(ts.redeem(wider.id, s2, peer(7), 2100).ok());
  const PeerRecord* p = ts.find(peer(7).key);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->grant, wider.scope) << "the operator's link replaces the scope, exec dropped and run added";
}

TEST_F(TrustStoreTest, ScopeChangesPersist) {
  TrustStore ts = open();
  PeerRecord p = peer(5);
  ASSERT_TRUE(ts.upsert(p).ok());
  Scope s;
  s.capabilities = static_cast<uint8_t>(Capability::kFiles);
  s.gpus = 4;
  ASSERT_TRUE(ts.set_grant(p.key, s).ok());
  EXPECT_EQ(open().find(p.key)->grant, s);
}

}  // namespace
}  // namespace yonder::peers
