// LanPaths' decision (net/reach/lan_core.h): which LAN sightings are dialled.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "net/reach/lan_core.h"
#include "support/core_purity.h"

namespace yonder::reach {
namespace {

PublicKeyBytes key(uint8_t n) {
  PublicKeyBytes k{};
  k.fill(n);
  return k;
}

const PublicKeyBytes kSelf = key(5);
const LanSighting kSeen{"192.168.1.10", 7850};

// A provider we paired with: it grants us a scope, we grant it nothing.
LanPeer provider(uint8_t n = 9) {
  LanPeer p;
  p.paired = true;
  p.grants_us = true;
  p.key = key(n);
  return p;
}

TEST(LanCore, AConsumerDialsItsProviderSeenOnTheLan) {
  LanAction a = decide_lan_dial(kSelf, kSeen, provider());
  EXPECT_EQ(a.kind, LanAction::Kind::kDial);
  EXPECT_EQ(a.address, "192.168.1.10:7850");
  EXPECT_TRUE(a.reason.empty());
}

TEST(LanCore, AnUnpairedPeerOrOneWithoutALinkPortIsIgnored) {
  LanPeer stranger = provider();
  stranger.paired = false;
  LanAction a = decide_lan_dial(kSelf, kSeen, stranger);
  EXPECT_EQ(a.kind, LanAction::Kind::kIgnore);
  EXPECT_NE(a.reason.find("not a paired peer"), std::string::npos) << a.reason;
  a = decide_lan_dial(kSelf, LanSighting{"192.168.1.10", 0}, provider());
  EXPECT_EQ(a.kind, LanAction::Kind::kIgnore);
  EXPECT_NE(a.reason.find("port"), std::string::npos) << a.reason;
}

// The provider side does not dial its consumer: the consumer keeps the link
// up, and two dials would each drain the other's session.
TEST(LanCore, TheProviderLeavesTheDialToItsConsumer) {
  LanPeer consumer;
  consumer.paired = true;
  consumer.we_grant = true;
  consumer.key = key(9);
  EXPECT_FALSE(lan_we_dial(kSelf, consumer));
  LanAction a = decide_lan_dial(kSelf, kSeen, consumer);
  EXPECT_EQ(a.kind, LanAction::Kind::kIgnore);
  EXPECT_NE(a.reason.find("it dials"), std::string::npos) << a.reason;
}

// Between two nodes that grant each other, exactly one side dials: the one
// with the lower key, whichever of them asks.
TEST(LanCore, BetweenMutualGrantsExactlyTheLowerKeyDials) {
  for (uint8_t a = 0; a < 8; ++a) {
    for (uint8_t b = 0; b < 8; ++b) {
      if (a == b) continue;
      LanPeer b_seen_by_a{true, true, true, key(b), std::nullopt};
      LanPeer a_seen_by_b{true, true, true, key(a), std::nullopt};
      bool a_dials = lan_we_dial(key(a), b_seen_by_a);
      bool b_dials = lan_we_dial(key(b), a_seen_by_b);
      EXPECT_NE(a_dials, b_dials) << int(a) << " " << int(b);
      EXPECT_EQ(a_dials, a < b) << int(a) << " " << int(b);
    }
  }
  LanPeer higher{true, true, true, key(1), std::nullopt};  // its key is lower than kSelf's
  LanAction ignored = decide_lan_dial(kSelf, kSeen, higher);
  EXPECT_EQ(ignored.kind, LanAction::Kind::kIgnore);
  EXPECT_NE(ignored.reason.find("lower"), std::string::npos) << ignored.reason;
}

// A link on a LAN or direct path stays; one on a worse path (or none) moves.
TEST(LanCore, OnlyAPeerWithoutALanOrDirectPathIsDialled) {
  const std::vector<std::pair<std::optional<PathKind>, bool>> cases = {
      {std::nullopt, true},       {PathKind::kRelay, true},   {PathKind::kPunched, true},
      {PathKind::kMapped, true},  {PathKind::kDirect, false}, {PathKind::kLan, false},
  };
  for (const auto& [best, dial] : cases) {
    LanPeer p = provider();
    p.best = best;
    LanAction a = decide_lan_dial(kSelf, kSeen, p);
    EXPECT_EQ(a.kind == LanAction::Kind::kDial, dial) << (best ? static_cast<int>(*best) : -1);
    if (!dial) {
      EXPECT_NE(a.reason.find("already"), std::string::npos) << a.reason;
    }
  }
}

TEST(LanCore, PathKindsFollowTheLinksRanks) {
  EXPECT_EQ(path_kind_from_rank(0), PathKind::kLan);
  EXPECT_EQ(path_kind_from_rank(1), PathKind::kDirect);
  EXPECT_EQ(path_kind_from_rank(2), PathKind::kMapped);
  EXPECT_EQ(path_kind_from_rank(3), PathKind::kPunched);
  EXPECT_EQ(path_kind_from_rank(4), PathKind::kRelay);
  EXPECT_EQ(path_kind_from_rank(-1), PathKind::kLan);
  EXPECT_EQ(path_kind_from_rank(99), PathKind::kRelay);  // unknown: never looks better than it is
}

// ---- Purity: the core and what it includes stay free of I/O ----

TEST(LanCorePurity, NoThreadsClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>",   "<mutex>",     "<condition_variable>", "<future>",
                                           "<atomic>",   "asio",        "sqlite",               "base/clock.h",
                                           "<fstream>",  "<filesystem>", "<sys/",               "<unistd.h>",
                                           "os/",        "store/",      "peers/",               "spdlog",
                                           "nlohmann",   "api/",        "net/link/",            "discovery/"};
  std::set<std::string> files = testing::check_core_purity({"net/reach/lan_core.h", "net/reach/lan_core.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_EQ(files, (std::set<std::string>{"net/reach/lan_core.h", "net/reach/lan_core.cpp", "net/reach/path_kind.h",
                                          "crypto/node_id.h", "base/error.h"}));
}

}  // namespace
}  // namespace yonder::reach
