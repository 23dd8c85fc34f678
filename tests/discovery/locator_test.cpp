// The locator record (discovery/locator.h): sealed per pair, found only by
// the pair, signed by its publisher, bounded; and when to publish and look up.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "discovery/locator.h"
#include "discovery/pair_key.h"
#include "support/core_purity.h"

namespace yonder::discovery {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

struct Pair {
  Identity provider = Identity::generate().value();
  Identity consumer = Identity::generate().value();
  PairKey key = derive_pair_key(provider, consumer.public_key()).value();
};

LocatorRecord record_of(const Identity& id) {
  LocatorRecord r;
  r.publisher = id.public_key();
  r.issued_at = 1'780'000'000;
  r.addresses = {"198.18.0.6:7850", "192.168.1.20:7850"};
  r.relays = {"198.18.0.1:7851@" + Identity::generate().value().node_id().to_string()};
  return r;
}

LocatorNonce nonce(uint8_t b) {
  LocatorNonce n{};
  n.fill(b);
  return n;
}

bool contains(const Bytes& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

TEST(Locator, BothSidesOfAPairDeriveTheSameKeyAndOnlyThePeerOpensTheRecord) {
  Pair p;
  EXPECT_EQ(derive_pair_key(p.consumer, p.provider.public_key()).value(), p.key);
  auto rec = record_of(p.provider);
  Bytes sealed = seal_locator(p.provider, p.key, rec, nonce(7));
  auto opened = open_locator(p.key, p.provider.public_key(), sealed);
  ASSERT_TRUE(opened) << opened.error().to_string();
  EXPECT_EQ(*opened, rec);
  // A third node paired with the provider has another key: it learns nothing.
  Identity other = Identity::generate().value();
  auto other_key = derive_pair_key(other, p.provider.public_key()).value();
  auto refused = open_locator(other_key, p.provider.public_key(), sealed);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(refused.error().message().find("does not decrypt"), std::string::npos) << refused.error().message();
}

TEST(Locator, NothingIsInTheClear) {
  Pair p;
  auto rec = record_of(p.provider);
  Bytes sealed = seal_locator(p.provider, p.key, rec, nonce(1));
  for (const auto& s : rec.addresses) EXPECT_FALSE(contains(sealed, s)) << s;
  EXPECT_FALSE(contains(sealed, "198.18.0"));
  EXPECT_FALSE(contains(sealed, p.provider.node_id().to_string()));
  std::string key(p.provider.public_key().begin(), p.provider.public_key().end());
  EXPECT_FALSE(contains(sealed, key)) << "the publisher's raw key";
  EXPECT_FALSE(contains(sealed, "YLOC"));
  // Two seals of one record (fresh nonces) share nothing an observer could link.
  Bytes again = seal_locator(p.provider, p.key, rec, nonce(2));
  EXPECT_NE(Bytes(sealed.begin() + 24, sealed.end()), Bytes(again.begin() + 24, again.end()));
}

TEST(Locator, TheLocationDependsOnPairPublisherAndDay) {
  Pair p;
  auto today = locator_location(p.key, p.provider.public_key(), 20000);
  EXPECT_EQ(today, locator_location(p.key, p.provider.public_key(), 20000));
  EXPECT_NE(today, locator_location(p.key, p.provider.public_key(), 20001)) << "another day";
  EXPECT_NE(today, locator_location(p.key, p.consumer.public_key(), 20000)) << "the other direction";
  Identity other = Identity::generate().value();
  auto other_key = derive_pair_key(other, p.provider.public_key()).value();
  EXPECT_NE(today, locator_location(other_key, p.provider.public_key(), 20000)) << "another pair";
  EXPECT_EQ(locator_day(0), 0);
  EXPECT_EQ(locator_day(86399), 0);
  EXPECT_EQ(locator_day(86400), 1);
  EXPECT_EQ(locator_day(-1), -1);
}

TEST(Locator, ARecordIsThePublishersAlone) {
  Pair p;
  // The consumer, who holds the pair key, cannot pass a record off as the
  // provider's: the signature inside is checked against the provider's key.
  auto forged = record_of(p.consumer);
  Bytes sealed = seal_locator(p.consumer, p.key, forged, nonce(3));
  auto r = open_locator(p.key, p.provider.public_key(), sealed);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("another node"), std::string::npos) << r.error().message();
  // Any flipped byte fails (the AEAD tag).
  Bytes good = seal_locator(p.provider, p.key, record_of(p.provider), nonce(4));
  for (size_t i = 0; i < good.size(); i += 7) {
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_FALSE(open_locator(p.key, p.provider.public_key(), bad)) << "byte " << i;
  }
  // Cut short, too long.
  EXPECT_FALSE(open_locator(p.key, p.provider.public_key(), ByteView(good.data(), 30)));
  Bytes huge(kMaxLocatorValueBytes + 1, 0);
  auto too_long = open_locator(p.key, p.provider.public_key(), huge);
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message().find("too long"), std::string::npos);
}

TEST(Locator, TheLargestRecordFitsTheBound) {
  Pair p;
  LocatorRecord r;
  r.publisher = p.provider.public_key();
  r.issued_at = 1;
  for (size_t i = 0; i < kMaxLocatorAddresses; ++i) r.addresses.push_back(std::string(255, 'a' + static_cast<char>(i)));
  for (size_t i = 0; i < kMaxLocatorRelays; ++i) r.relays.push_back(std::string(255, 'r'));
  Bytes sealed = seal_locator(p.provider, p.key, r, nonce(5));
  EXPECT_EQ(sealed.size(), kMaxLocatorValueBytes);
  EXPECT_EQ(open_locator(p.key, p.provider.public_key(), sealed).value(), r);
}

TEST(Locator, OnlyANewerRecordFromNotTooFarAheadIsUsed) {
  LocatorRecord r;
  r.issued_at = 1000;
  EXPECT_TRUE(locator_is_newer(std::nullopt, r, 1000));
  EXPECT_TRUE(locator_is_newer(999, r, 1000));
  EXPECT_FALSE(locator_is_newer(1000, r, 1000)) << "the same record again (a replay)";
  EXPECT_FALSE(locator_is_newer(1001, r, 1000)) << "an older one";
  r.issued_at = 1000 + 601;
  EXPECT_FALSE(locator_is_newer(std::nullopt, r, 1000)) << "more than 10 minutes ahead";
}

TEST(LocatorSchedule, PublishesOnChangeOnANewDayAndEveryTenMinutes) {
  Steady::time_point t0{};
  PublishState s;
  std::vector<std::string> a = {"198.18.0.5:7850"}, relays;
  EXPECT_TRUE(publish_due(s, t0, 5, a, relays)) << "never published";
  s = {t0, 5, a, relays};
  EXPECT_FALSE(publish_due(s, t0 + 9min, 5, a, relays));
  EXPECT_TRUE(publish_due(s, t0 + 10min, 5, a, relays));
  EXPECT_TRUE(publish_due(s, t0 + 1s, 6, a, relays)) << "a new day: a new location";
  EXPECT_TRUE(publish_due(s, t0 + 1s, 5, {"198.18.0.6:7850"}, relays)) << "moved";
  EXPECT_TRUE(publish_due(s, t0 + 1s, 5, a, {"198.18.0.1:7851@X"})) << "a relay";
}

TEST(LocatorSchedule, LooksUpAPeerOnlyAfterItWasDownAWhileAndNotTooOften) {
  Steady::time_point t0{};
  LookupState s;
  EXPECT_FALSE(lookup_due(s, t0 + 1h)) << "connected";
  s.down_since = t0;
  EXPECT_FALSE(lookup_due(s, t0 + 4s)) << "the link redials the known addresses first";
  EXPECT_TRUE(lookup_due(s, t0 + 5s));
  s.last_lookup = t0 + 5s;
  EXPECT_FALSE(lookup_due(s, t0 + 19s));
  EXPECT_TRUE(lookup_due(s, t0 + 20s));
  s.running = true;
  EXPECT_FALSE(lookup_due(s, t0 + 1h)) << "one at a time";
}

TEST(LocatorPurity, NoThreadsClocksSocketsOrTheDht) {
  const std::vector<std::string> banned = {"<thread>", "<mutex>", "<future>", "<atomic>", "asio",  "opendht",
                                           "sqlite",   "base/clock.h", "<fstream>", "<sys/", "os/", "spdlog"};
  auto files = testing::check_core_purity({"discovery/locator.h", "discovery/locator.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_TRUE(files.count("discovery/locator.cpp"));
  EXPECT_FALSE(files.count("discovery/dht_node.h"));
}

}  // namespace
}  // namespace yonder::discovery
