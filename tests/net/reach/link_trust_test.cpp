// The link's trust policy (net/reach/link_trust.h): the authorisation rule
// as a pure function, and LinkTrust over a real trust store with a manual
// clock (which keys may connect, redeeming a link, refusals and trust events).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "net/reach/link_trust.h"
#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::reach {
namespace {

using namespace std::chrono_literals;

Scope scope_of(std::initializer_list<Capability> caps) {
  Scope s;
  s.capabilities = 0;
  for (Capability c : caps) s.capabilities = static_cast<uint8_t>(s.capabilities | static_cast<uint8_t>(c));
  return s;
}

TEST(AuthorizeCall, APeerThatIsNotPinnedIsRefusedWhateverItCalls) {
  for (std::string method : {"run.submit", "group.sync", "node.info"}) {
    Status st = authorize_call(std::nullopt, method);
    ASSERT_FALSE(st.ok()) << method;
    EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
    EXPECT_NE(st.error().message().find("no longer accepts"), std::string::npos) << st.error().message();
  }
}

TEST(AuthorizeCall, EachCapabilityGuardsItsMethodsOnly) {
  const std::vector<std::pair<Capability, std::string>> guarded = {
      {Capability::kRun, "run.submit"},    {Capability::kExec, "exec.open"},  {Capability::kForward, "forward.open"},
      {Capability::kFiles, "files.fetch"}, {Capability::kMesh, "mesh.lease"}, {Capability::kCuda, "cuda.session"},
  };
  for (const auto& [cap, method] : guarded) {
    EXPECT_TRUE(authorize_call(scope_of({cap}), method).ok()) << method;
    for (const auto& [other, other_method] : guarded) {
      if (other == cap) continue;
      Status st = authorize_call(scope_of({cap}), other_method);
      ASSERT_FALSE(st.ok()) << other_method;
      EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
    }
  }
}

TEST(AuthorizeCall, TheRefusalNamesTheMissingCapabilityAndWhatToAskFor) {
  Status st = authorize_call(scope_of({Capability::kRun}), "exec.open");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("\"exec\""), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("it allows run"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("yonder allow"), std::string::npos) << st.error().message();
}

// Methods outside the capabilities (groups, hello-level) need only the pin.
TEST(AuthorizeCall, AnyPinnedPeerMayCallMethodsNoCapabilityGuards) {
  for (std::string method : {"group.sync", "node.info", "ping"}) {
    EXPECT_TRUE(authorize_call(scope_of({}), method).ok()) << method;
  }
}

class LinkTrustTest : public ::testing::Test {
 protected:
  LinkTrustTest() {
    auto db = store::Database::open(path_);
    EXPECT_TRUE(db.ok());
    EXPECT_TRUE(store::migrate(*db).ok());
    auto opened = peers::TrustStore::open(path_);
    EXPECT_TRUE(opened.ok());
    store_.emplace(std::move(*opened));
    trust_.emplace(*store_, clock_);
  }
  static PublicKeyBytes key(uint8_t n) {
    PublicKeyBytes k{};
    k.fill(n);
    return k;
  }
  // A share link for `caps`, valid for an hour from the clock's now.
  peers::LinkRecord add_link(uint8_t tag, Scope scope, LinkSecret& secret) {
    peers::LinkRecord l;
    l.id.fill(tag);
    secret.fill(static_cast<uint8_t>(tag + 1));
    l.secret_hash = hash_link_secret(secret);
    l.scope = scope;
    l.created_at = unix_seconds(clock_.now());
    l.expires_at = l.created_at + 3600;
    EXPECT_TRUE(store_->add_link(l).ok());
    return l;
  }

  testing::TempDir dir_;
  std::string path_ = dir_ / "state.db";
  ManualClock clock_{TimePoint{} + 20000h};
  std::optional<peers::TrustStore> store_;
  std::optional<LinkTrust> trust_;
};

// Unknown keys get a handshake only while a link can still be redeemed.
TEST_F(LinkTrustTest, UnknownKeysMayOnlyPairAndOnlyWhileALinkIsRedeemable) {
  EXPECT_EQ(trust_->classify(key(9)), link::KeyVerdict::kReject);
  LinkSecret secret{};
  add_link(1, scope_of({Capability::kRun}), secret);
  EXPECT_EQ(trust_->classify(key(9)), link::KeyVerdict::kPairingOnly);
  clock_.advance(2h);  // the link expired
  EXPECT_EQ(trust_->classify(key(9)), link::KeyVerdict::kReject);
}

TEST_F(LinkTrustTest, RedeemingPinsThePeerTellsTheHooksAndAnswersWithTheScope) {
  LinkSecret secret{};
  peers::LinkRecord l = add_link(1, scope_of({Capability::kRun}), secret);
  int changed = 0;
  std::vector<std::string> events;
  trust_->on_peers_changed([&] { ++changed; });
  trust_->on_trust_event(
      [&](const std::string& actor, const std::string& action, const std::string& subject, nlohmann::json detail) {
        events.push_back(action);
        EXPECT_EQ(actor, NodeId(key(9)).to_string());
        EXPECT_EQ(subject, hex_encode(l.id));
        EXPECT_EQ(detail.value("check_digits", ""), "12345");
      });
  trust_->on_redeemed([](const LinkIdBytes&, const PublicKeyBytes&, const std::string& name) {
    return nlohmann::json{{"groups", name}};
  });
  trust_->set_provider_notice("jobs run without a container");
  auto answer = trust_->redeem(l.id, secret, key(9), "consumer", "12345");
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  EXPECT_EQ(changed, 1);
  EXPECT_EQ(events, std::vector<std::string>{"trust.pair"});
  EXPECT_EQ(answer->value("notice", ""), "jobs run without a container");
  EXPECT_EQ(answer->value("groups", ""), "consumer");
  EXPECT_TRUE(answer->contains("scope"));
  EXPECT_EQ(trust_->classify(key(9)), link::KeyVerdict::kPinned);
  // Used up: a replay pins nobody and tells nobody.
  EXPECT_FALSE(trust_->redeem(l.id, secret, key(10), "other", "00000").ok());
  EXPECT_EQ(changed, 1);
}

TEST_F(LinkTrustTest, EveryRefusalReachesTheHookAndADeniedPeerIsRefusedEverything) {
  LinkSecret secret{};
  peers::LinkRecord l = add_link(1, scope_of({Capability::kRun}), secret);
  ASSERT_TRUE(trust_->redeem(l.id, secret, key(9), "consumer", "12345").ok());
  std::vector<std::string> refused;
  trust_->on_refused(
      [&](const PublicKeyBytes&, const std::string& method, const Error&) { refused.push_back(method); });
  EXPECT_TRUE(trust_->authorize(key(9), "run.submit").ok());
  EXPECT_FALSE(trust_->authorize(key(9), "exec.open").ok());
  ASSERT_TRUE(store_->deny(key(9), unix_seconds(clock_.now())).ok());
  Status st = trust_->authorize(key(9), "run.submit");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("no longer accepts"), std::string::npos) << st.error().message();
  EXPECT_EQ(refused, (std::vector<std::string>{"exec.open", "run.submit"}));
}

TEST_F(LinkTrustTest, SeenStampsThePeerWithTheClocksTime) {
  LinkSecret secret{};
  peers::LinkRecord l = add_link(1, scope_of({Capability::kRun}), secret);
  ASSERT_TRUE(trust_->redeem(l.id, secret, key(9), "consumer", "12345").ok());
  clock_.advance(90s);
  trust_->seen(key(9));
  const peers::PeerRecord* p = store_->find(key(9));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->last_seen_at.has_value());
  EXPECT_EQ(*p->last_seen_at, unix_seconds(clock_.now()));
}

}  // namespace
}  // namespace yonder::reach
