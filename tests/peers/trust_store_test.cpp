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
