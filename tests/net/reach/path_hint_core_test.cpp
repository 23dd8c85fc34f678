// MappedPaths' decisions (net/reach/path_hint_core.h): which peers hear of
// our mapped port, and which hints from peers are dialled.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "net/reach/path_hint_core.h"
#include "support/core_purity.h"

namespace yonder::reach {
namespace {

using namespace std::chrono_literals;
using Kind = HintVerdict::Kind;

PublicKeyBytes peer_key(uint8_t n) {
  PublicKeyBytes k{};
  k.fill(n);
  return k;
}

const MonoTime kT0 = MonoTime{} + 1000h;

TEST(PathHintCore, OnlyPeersOnARelayOrPunchedPathHearOfOurMappedPort) {
  for (PathKind k : {PathKind::kRelay, PathKind::kPunched}) {
    auto hint = hint_to_send("203.0.113.2:7850", k);
    ASSERT_TRUE(hint) << static_cast<int>(k);
    EXPECT_EQ(hint->mapped, "203.0.113.2:7850");
  }
  for (PathKind k : {PathKind::kMapped, PathKind::kDirect, PathKind::kLan}) {
    EXPECT_FALSE(hint_to_send("203.0.113.2:7850", k)) << static_cast<int>(k);
  }
}

TEST(PathHintCore, NothingToSendWhileTheRouterMapsNothing) {
  EXPECT_FALSE(hint_to_send("", PathKind::kRelay));
}

TEST(PathHintCore, AHintIsAdmittedFromAProviderWeKeepTheLinkTo) {
  PathHintCore core;
  HintVerdict v = core.admit(peer_key(1), relay::PathHint{"203.0.113.2:7850"}, true, kT0);
  EXPECT_EQ(v.kind, Kind::kDial);
  EXPECT_EQ(v.detail, "203.0.113.2:7850");
}

// The side that keeps the link up dials, as on the LAN; a hint without an
// address says nothing. Neither spends the peer's rate.
TEST(PathHintCore, HintsWeWouldNotDialAreIgnoredWithoutSpendingTheRate) {
  PathHintCore core;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(core.admit(peer_key(1), relay::PathHint{"203.0.113.2:7850"}, false, kT0).kind, Kind::kIgnore);
    EXPECT_EQ(core.admit(peer_key(1), relay::PathHint{}, true, kT0).kind, Kind::kIgnore);
  }
  EXPECT_EQ(core.admit(peer_key(1), relay::PathHint{"203.0.113.2:7850"}, true, kT0).kind, Kind::kDial);
}

TEST(PathHintCore, EachPeersHintsAreRateLimitedOnItsOwn) {
  PathHintCore core;
  relay::PathHint hint{"203.0.113.2:7850"};
  for (int i = 0; i < relay::HintRateLimit::kBurst; ++i) {
    EXPECT_EQ(core.admit(peer_key(1), hint, true, kT0).kind, Kind::kDial) << i;
  }
  HintVerdict over = core.admit(peer_key(1), hint, true, kT0);
  EXPECT_EQ(over.kind, Kind::kRateLimited);
  EXPECT_EQ(over.detail, "203.0.113.2:7850");
  // Another peer has its own bucket.
  EXPECT_EQ(core.admit(peer_key(2), hint, true, kT0).kind, Kind::kDial);
  // The bucket refills with `now`, one hint per interval.
  EXPECT_EQ(core.admit(peer_key(1), hint, true, kT0 + relay::HintRateLimit::kInterval / 2).kind, Kind::kRateLimited);
  EXPECT_EQ(core.admit(peer_key(1), hint, true, kT0 + relay::HintRateLimit::kInterval).kind, Kind::kDial);
  EXPECT_EQ(core.admit(peer_key(1), hint, true, kT0 + relay::HintRateLimit::kInterval).kind, Kind::kRateLimited);
}

TEST(PathHintCore, TheTargetMustBeWhereThePeerIsKnownToBe) {
  relay::HintDialContext ctx{{"192.168.1.10"}, {"10.0.0.5"}, {"203.0.113.2"}};
  HintVerdict ok = PathHintCore::target("203.0.113.2:7850", ctx);
  EXPECT_EQ(ok.kind, Kind::kDial);
  EXPECT_EQ(ok.detail, "203.0.113.2:7850");
  for (std::string bad : {"127.0.0.1:22", "10.0.0.5:7850", "93.184.216.34:443"}) {
    HintVerdict v = PathHintCore::target(bad, ctx);
    EXPECT_EQ(v.kind, Kind::kRefused) << bad;
    EXPECT_NE(v.detail.find(bad), std::string::npos) << v.detail;
  }
}

// ---- Purity: the core and what it includes stay free of I/O ----

TEST(PathHintCorePurity, NoThreadsClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>",   "<mutex>",     "<condition_variable>", "<future>",
                                           "<atomic>",   "asio",        "sqlite",               "base/clock.h",
                                           "<fstream>",  "<filesystem>", "<sys/",               "<unistd.h>",
                                           "os/",        "store/",      "peers/",               "spdlog",
                                           "nlohmann",   "api/",        "net/link/",            "portmap/"};
  std::set<std::string> files =
      testing::check_core_purity({"net/reach/path_hint_core.h", "net/reach/path_hint_core.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_EQ(files, (std::set<std::string>{"net/reach/path_hint_core.h", "net/reach/path_hint_core.cpp",
                                          "net/reach/path_kind.h", "crypto/node_id.h", "relay/path_hint.h",
                                          "base/bytes.h", "base/error.h", "base/token_bucket.h"}));
}

}  // namespace
}  // namespace yonder::reach
