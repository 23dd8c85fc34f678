// Relays from among our peers (net/reach/relay_offer_core.h): when a node
// checks its reachability, whether and where it offers a relay, which
// offers of its peers it reads and which it registers with.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "net/reach/relay_offer_core.h"
#include "support/core_purity.h"

namespace yonder::reach {
namespace {

using namespace std::chrono_literals;
using State = Reachability::State;

PublicKeyBytes offer_key(uint8_t n) {
  PublicKeyBytes k{};
  k.fill(n);
  return k;
}

const MonoTime kOfferT0 = MonoTime{} + 1000h;

Reachability verdict(State state, std::string address = "") {
  Reachability r;
  r.state = state;
  r.address = std::move(address);
  return r;
}

TEST(RelayOfferMode, AutoOrOffAndAnythingElseSaysWhatIsAllowed) {
  EXPECT_EQ(*parse_relay_offer_mode("auto"), RelayOfferMode::kAuto);
  EXPECT_EQ(*parse_relay_offer_mode("off"), RelayOfferMode::kOff);
  auto bad = parse_relay_offer_mode("yes");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("\"auto\""), std::string::npos) << bad.error().message();
}

TEST(ReachabilityCheckDue, FirstSessionThenAfterTheRecheckIntervalNeverTwiceAtOnce) {
  const auto kAuto = RelayOfferMode::kAuto;
  EXPECT_TRUE(reachability_check_due(kAuto, true, false, std::nullopt, std::nullopt, kOfferT0));
  // Off, not listening beyond loopback, or a round already out: never.
  EXPECT_FALSE(reachability_check_due(RelayOfferMode::kOff, true, false, std::nullopt, std::nullopt, kOfferT0));
  EXPECT_FALSE(reachability_check_due(kAuto, false, false, std::nullopt, std::nullopt, kOfferT0));
  EXPECT_FALSE(reachability_check_due(kAuto, true, true, std::nullopt, std::nullopt, kOfferT0));
  // After a verdict: not again until kRecheckAfterVerdict.
  auto reachable = verdict(State::kReachable, "198.51.100.7:7850");
  EXPECT_FALSE(reachability_check_due(kAuto, true, false, kOfferT0, reachable, kOfferT0 + kRecheckAfterVerdict - 1s));
  EXPECT_TRUE(reachability_check_due(kAuto, true, false, kOfferT0, reachable, kOfferT0 + kRecheckAfterVerdict));
  // No helper answered ("unknown"): sooner.
  auto unknown = verdict(State::kUnknown);
  EXPECT_FALSE(reachability_check_due(kAuto, true, false, kOfferT0, unknown, kOfferT0 + kRecheckAfterUnknown - 1s));
  EXPECT_TRUE(reachability_check_due(kAuto, true, false, kOfferT0, unknown, kOfferT0 + kRecheckAfterUnknown));
}

OfferFacts facts(std::optional<Reachability> v, uint16_t relay_port = 0, std::string link_mapped = "",
                 std::string relay_mapped = "", RelayOfferMode mode = RelayOfferMode::kAuto) {
  return OfferFacts{mode, std::move(v), std::move(link_mapped), relay_port, std::move(relay_mapped), false};
}

TEST(DecideOffer, OnlyWhenPeersConfirmedThisNodeReachableAtTheReachedHostAndTheRelaysPort) {
  auto reachable = verdict(State::kReachable, "198.51.100.7:7850");
  // Reachable: start the relay; offer it once it listens.
  auto starting = decide_offer(facts(reachable));
  EXPECT_TRUE(starting.run_relay);
  EXPECT_FALSE(starting.map_relay);
  EXPECT_EQ(starting.address, "");
  EXPECT_FALSE(starting.why.empty());
  auto yes = decide_offer(facts(reachable, 7851));
  EXPECT_TRUE(yes.run_relay);
  EXPECT_EQ(yes.address, "198.51.100.7:7851");
  for (const auto& v : {std::optional<Reachability>{}, std::optional<Reachability>(verdict(State::kUnknown)),
                        std::optional<Reachability>(verdict(State::kUnreachable))}) {
    auto no = decide_offer(facts(v, 7851));
    EXPECT_FALSE(no.run_relay);
    EXPECT_EQ(no.address, "");
    EXPECT_FALSE(no.why.empty());
  }
  auto off = decide_offer(facts(reachable, 7851, "", "", RelayOfferMode::kOff));
  EXPECT_FALSE(off.run_relay);
  EXPECT_EQ(off.address, "");
  EXPECT_EQ(off.why, "relay.offer is off");
}

// Reachability lost: the relay the offer opened is closed (with the
// router's forward of its port), not left listening for nobody; a relay the
// operator configured (relay.listen) stays, and "unknown" closes nothing.
TEST(DecideOffer, PeersThatCannotReachThisNodeCloseTheRelayTheOfferOpenedButNotAConfiguredOne) {
  auto unreachable = verdict(State::kUnreachable);
  EXPECT_TRUE(decide_offer(facts(unreachable, 7851)).stop_relay);
  EXPECT_TRUE(decide_offer(facts(unreachable, 0, "203.0.113.2:40001", "203.0.113.2:40002")).stop_relay);
  EXPECT_FALSE(decide_offer(facts(unreachable)).stop_relay);  // nothing runs
  auto configured = facts(unreachable, 7851);
  configured.relay_configured = true;
  EXPECT_FALSE(decide_offer(configured).stop_relay);
  EXPECT_FALSE(decide_offer(facts(verdict(State::kUnknown), 7851)).stop_relay);
  EXPECT_FALSE(decide_offer(facts(std::nullopt, 7851)).stop_relay);
  auto reachable = decide_offer(facts(verdict(State::kReachable, "198.51.100.7:7850"), 7851));
  EXPECT_FALSE(reachable.stop_relay);
  EXPECT_TRUE(reachable.run_relay);
  EXPECT_TRUE(decide_offer(facts(verdict(State::kReachable, "198.51.100.7:7850"), 7851, "", "", RelayOfferMode::kOff))
                  .stop_relay);
}

// Peers reached the router's mapping of the link port: the relay's port is
// mapped too, and offered at that mapping (never at the link's host with
// the relay's local port, which the router does not forward).
TEST(DecideOffer, ReachedThroughTheRoutersMappingTheRelaysPortIsMappedAndOfferedThere) {
  auto via_mapping = verdict(State::kReachable, "203.0.113.2:40001");
  auto waiting = decide_offer(facts(via_mapping, 7851, "203.0.113.2:40001"));
  EXPECT_TRUE(waiting.run_relay);
  EXPECT_TRUE(waiting.map_relay);
  EXPECT_EQ(waiting.address, "");
  EXPECT_NE(waiting.why.find("mapped the relay's port"), std::string::npos) << waiting.why;
  auto mapped = decide_offer(facts(via_mapping, 7851, "203.0.113.2:40001", "203.0.113.2:40002"));
  EXPECT_TRUE(mapped.map_relay);
  EXPECT_EQ(mapped.address, "203.0.113.2:40002");
  // Reached at another (public) address while a mapping exists: that host,
  // the relay's own port, no mapping needed.
  auto public_too = decide_offer(facts(verdict(State::kReachable, "198.51.100.7:7850"), 7851, "203.0.113.2:40001"));
  EXPECT_FALSE(public_too.map_relay);
  EXPECT_EQ(public_too.address, "198.51.100.7:7851");
}

TEST(DefaultRelayListen, RelayListenOrTheLinksHostAndNextPort) {
  EXPECT_EQ(default_relay_listen("10.0.0.1:9000", "0.0.0.0:7850"), "10.0.0.1:9000");
  EXPECT_EQ(default_relay_listen("", "0.0.0.0:7850"), "0.0.0.0:7851");
  EXPECT_EQ(default_relay_listen("", "[::]:7850"), "[::]:7851");
  EXPECT_EQ(default_relay_listen("", "0.0.0.0:0"), "0.0.0.0:0");
  EXPECT_EQ(default_relay_listen("", ""), "");
  EXPECT_EQ(default_relay_listen("", "0.0.0.0:65535"), "");
  EXPECT_EQ(default_relay_listen("", "0.0.0.0:x"), "");
}

TEST(ReadRelayOffer, APublicEndpointNotOursOrAWithdrawalAndNothingElse) {
  const std::vector<std::string> own = {"127.0.0.1", "203.0.113.5"};
  EXPECT_EQ(*read_relay_offer(relay_offer_body("198.51.100.7:7851"), own), "198.51.100.7:7851");
  EXPECT_EQ(*read_relay_offer(relay_offer_body(""), own), "");
  for (const auto& bad : {nlohmann::json::array(), nlohmann::json{{"address", 7}}, nlohmann::json::object(),
                          nlohmann::json{{"address", "192.168.1.1:7851"}}, nlohmann::json{{"address", "127.0.0.1:22"}},
                          nlohmann::json{{"address", "203.0.113.5:7851"}}, nlohmann::json{{"address", "a.b:1"}},
                          nlohmann::json{{"address", std::string(5000, '1')}}}) {
    auto r = read_relay_offer(bad, own);
    EXPECT_FALSE(r) << bad.dump().substr(0, 80);
    if (!r) {
      EXPECT_LT(r.error().message().size(), 200u) << "the refusal repeats what it was sent";
    }
  }
}

TEST(ChooseOfferedRelays, LowestRttFirstUnknownLastOnePerPeerAtMostThree) {
  std::vector<PeerOffer> offers = {
      {offer_key(1), "slow", "198.51.100.1:7851", 80.0},
      {offer_key(2), "unknown", "198.51.100.2:7851", std::nullopt},
      {offer_key(3), "fast", "198.51.100.3:7851", 5.0},
      {offer_key(4), "medium", "198.51.100.4:7851", 30.0},
      {offer_key(3), "fast", "198.51.100.33:7851", 50.0},
  };
  auto chosen = choose_offered_relays(offers, false);
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_EQ(chosen[0].address, "198.51.100.3:7851");
  EXPECT_EQ(chosen[1].address, "198.51.100.4:7851");
  EXPECT_EQ(chosen[2].address, "198.51.100.1:7851");
  // A node that offers its own relay uses none of its peers'.
  EXPECT_TRUE(choose_offered_relays(offers, true).empty());
  // With few offers, unknown RTTs are used too.
  auto two = choose_offered_relays({offers[1], offers[0]}, false);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].name, "unknown");
}

// Whatever the offers and their order: at most the bound, each peer and
// each address once, only offered addresses, and the same pick for the
// same offers in any order.
TEST(ChooseOfferedRelays, PropertiesOverRandomOffers) {
  std::mt19937 rng(2026);
  for (int round = 0; round < 500; ++round) {
    std::vector<PeerOffer> offers;
    int n = static_cast<int>(rng() % 9);
    for (int i = 0; i < n; ++i) {
      std::optional<double> rtt;
      if (rng() % 3 != 0) rtt = static_cast<double>(rng() % 100);
      offers.push_back({offer_key(static_cast<uint8_t>(rng() % 5)), "p",
                        "198.51.100." + std::to_string(rng() % 6) + ":7851", rtt});
    }
    size_t max = 1 + rng() % 4;
    auto chosen = choose_offered_relays(offers, false, max);
    EXPECT_LE(chosen.size(), max);
    std::set<PublicKeyBytes> peers;
    std::set<std::string> addresses;
    for (const auto& c : chosen) {
      EXPECT_TRUE(peers.insert(c.peer).second);
      EXPECT_TRUE(addresses.insert(c.address).second);
      EXPECT_NE(std::find(offers.begin(), offers.end(), c), offers.end());
    }
    auto shuffled = offers;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(choose_offered_relays(shuffled, false, max), chosen);
  }
}

TEST(RelayOfferCorePurity, NoThreadsClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>", "<mutex>",      "<condition_variable>", "<future>", "<atomic>",
                                           "asio",     "sqlite",       "base/clock.h",         "<fstream>", "<filesystem>",
                                           "<sys/",    "<unistd.h>",   "os/",                  "store/",   "peers/",
                                           "spdlog",   "api/",         "net/link/",            "portmap/"};
  auto files = testing::check_core_purity({"net/reach/relay_offer_core.h", "net/reach/relay_offer_core.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_EQ(files, (std::set<std::string>{"net/reach/relay_offer_core.h", "net/reach/relay_offer_core.cpp",
                                          "net/reach/dial_back_core.h", "crypto/node_id.h",
                                          "relay/path_hint.h", "base/bytes.h", "base/error.h", "base/token_bucket.h"}));
}

}  // namespace
}  // namespace yonder::reach
