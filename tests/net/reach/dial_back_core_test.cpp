// Reachability measured by peers (net/reach/dial_back_core.h): which of
// our addresses are tested, which peers are asked, what their answers mean,
// and which requests a peer may make of us (relay::check_dial_back_target).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "net/reach/dial_back_core.h"
#include "relay/path_hint.h"
#include "support/core_purity.h"

namespace yonder::reach {
namespace {

using namespace std::chrono_literals;
using State = Reachability::State;

PublicKeyBytes dial_key(uint8_t n) {
  PublicKeyBytes k{};
  k.fill(n);
  return k;
}

const MonoTime kDialT0 = MonoTime{} + 1000h;

TEST(DialBackCandidates, PublicAdvertisedThenMappedThenWhatARelaySawWithTheLinkPort) {
  auto c = dial_back_candidates({"192.168.1.10:7850", "198.51.100.7:7850", "127.0.0.1:7850"}, "203.0.113.2:40000",
                                {"203.0.113.9", "203.0.113.2"}, 7850);
  EXPECT_EQ(c, (std::vector<std::string>{"198.51.100.7:7850", "203.0.113.2:40000", "203.0.113.9:7850",
                                         "203.0.113.2:7850"}));
}

TEST(DialBackCandidates, EachOnceAtMostFourAndNoneWithoutAPort) {
  auto c = dial_back_candidates({"198.51.100.7:7850", "198.51.100.7:7850"}, "198.51.100.7:7850", {"198.51.100.7"}, 7850);
  EXPECT_EQ(c, (std::vector<std::string>{"198.51.100.7:7850"}));
  auto many = dial_back_candidates({"198.51.100.1:1", "198.51.100.2:1", "198.51.100.3:1", "198.51.100.4:1",
                                    "198.51.100.5:1"},
                                   "", {}, 7850);
  EXPECT_EQ(many.size(), kMaxDialBackAddresses);
  // A node whose link does not listen has no port for a relay's view of its IP.
  EXPECT_TRUE(dial_back_candidates({}, "", {"203.0.113.9"}, 0).empty());
  // Private, shared, loopback and link-local addresses are not what the internet reaches.
  EXPECT_TRUE(dial_back_candidates({"10.0.0.2:1", "172.16.0.1:1", "100.64.0.1:1", "169.254.1.1:1", "127.0.0.1:1"}, "",
                                   {}, 0)
                  .empty());
}

TEST(UdpDialBackCandidates, AdvertisedHostsWithTheUdpPortThenWhereStunSawTheSocket) {
  auto c = udp_dial_back_candidates({"192.168.1.10:7850", "198.51.100.7:7850", "127.0.0.1:7850"}, 7851,
                                    "203.0.113.2:40000");
  EXPECT_EQ(c, (std::vector<std::string>{"198.51.100.7:7851", "203.0.113.2:40000"}));
  // A NAT that keeps the port: STUN saw what the advertised address names already.
  EXPECT_EQ(udp_dial_back_candidates({"198.51.100.7:7850"}, 7850, "198.51.100.7:7850"),
            (std::vector<std::string>{"198.51.100.7:7850"}));
  // No UDP socket: nothing to test, whatever STUN said before.
  EXPECT_TRUE(udp_dial_back_candidates({"198.51.100.7:7850"}, 0, "203.0.113.2:40000").empty());
  // A node that listens for no links still has its socket's public mapping;
  // what is not "IP:PORT" or not public is skipped.
  EXPECT_EQ(udp_dial_back_candidates({":0", "10.0.0.2:7850"}, 40001, "203.0.113.2:40001"),
            (std::vector<std::string>{"203.0.113.2:40001"}));
  auto many = udp_dial_back_candidates({"198.51.100.1:1", "198.51.100.2:1", "198.51.100.3:1", "198.51.100.4:1",
                                        "198.51.100.5:1"},
                                       9, "203.0.113.2:40000");
  EXPECT_EQ(many.size(), kMaxDialBackAddresses);
}

TEST(DialBackHelpers, NotOnALanPathLowestRttFirstAtMostThreeOncePerPeer) {
  std::vector<Helper> connected = {
      {dial_key(1), "lan-friend", "lan to 192.168.1.5:7850", 0.3},
      {dial_key(2), "slow", "relay 198.18.0.1:7851", 80.0},
      {dial_key(3), "fast", "direct to 198.51.100.3:7850", 12.0},
      {dial_key(4), "unknown-rtt", "punched quic", std::nullopt},
      {dial_key(3), "fast", "relay 198.18.0.1:7851", 40.0},
      {dial_key(5), "medium", "mapped 198.51.100.5:7850", 30.0},
  };
  auto picked = pick_helpers(connected);
  std::vector<std::string> names;
  for (const auto& h : picked) names.push_back(h.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fast", "medium", "slow"}));
  // The same facts in another order give the same pick.
  std::reverse(connected.begin(), connected.end());
  auto again = pick_helpers(connected);
  ASSERT_EQ(again.size(), picked.size());
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i].key, picked[i].key);
  EXPECT_EQ(pick_helpers({{dial_key(1), "lan-only", "lan to x", 1.0}}).size(), 0u);
}

TEST(DialBackVerdict, ReachableWhenAHelperCompletedTheHandshakeNamingWhoAndWhere) {
  std::vector<std::string> c = {"198.51.100.7:7850", "203.0.113.2:40000"};
  std::vector<DialBackAnswer> answers = {
      {"laptop", std::nullopt, {{"198.51.100.7:7850", false}, {"203.0.113.2:40000", true}}, {}, false},
      {"club", std::nullopt, {{"198.51.100.7:7850", false}, {"203.0.113.2:40000", false}}, {}, false},
      {"away", std::string("timed out"), {}, {}, false},
  };
  auto r = dial_back_verdict(c, true, answers);
  EXPECT_EQ(r.state, State::kReachable);
  EXPECT_EQ(r.address, "203.0.113.2:40000");
  EXPECT_EQ(r.confirmed_by, (std::vector<std::string>{"laptop"}));
  EXPECT_EQ(r.failed_by, (std::vector<std::string>{"club"}));
  EXPECT_NE(r.why.find("laptop"), std::string::npos) << r.why;
  EXPECT_STREQ(reachability_state_name(r.state), "reachable");
}

TEST(DialBackVerdict, UnreachableOnlyWhenAHelperAnsweredAndReachedNone) {
  std::vector<std::string> c = {"198.51.100.7:7850"};
  auto no = dial_back_verdict(c, true, {{"laptop", std::nullopt, {{"198.51.100.7:7850", false}}, {}, false}});
  EXPECT_EQ(no.state, State::kUnreachable);
  EXPECT_EQ(no.failed_by, (std::vector<std::string>{"laptop"}));
  EXPECT_NE(no.why.find("198.51.100.7:7850"), std::string::npos) << no.why;
  EXPECT_NE(no.why.find("link.port_mapping"), std::string::npos) << no.why;
  // Nobody answered: no evidence either way.
  auto silent = dial_back_verdict(c, true, {{"laptop", std::string("timed out"), {}, {}, false}});
  EXPECT_EQ(silent.state, State::kUnknown);
  EXPECT_NE(silent.why.find("timed out"), std::string::npos) << silent.why;
  // An answer about an address we did not ask about says nothing.
  auto other = dial_back_verdict(c, true, {{"laptop", std::nullopt, {}, {}, false}});
  EXPECT_EQ(other.state, State::kUnreachable);
}

TEST(DialBackVerdict, UnknownWithoutCandidatesOrHelpersSaysWhy) {
  auto quiet = dial_back_verdict({}, false, {});
  EXPECT_EQ(quiet.state, State::kUnknown);
  EXPECT_NE(quiet.why.find("link.listen"), std::string::npos) << quiet.why;
  auto nothing = dial_back_verdict({}, true, {});
  EXPECT_NE(nothing.why.find("link.advertise"), std::string::npos) << nothing.why;
  auto alone = dial_back_verdict({"198.51.100.7:7850"}, true, {});
  EXPECT_EQ(alone.state, State::kUnknown);
  EXPECT_NE(alone.why.find("no paired peer"), std::string::npos) << alone.why;
}

// TCP and UDP are judged apart from the same answers: a node behind a router
// that forwards only the TCP port is reachable over TCP and not over UDP; a
// helper that did not dial over UDP (no socket, an older yonder) is no
// evidence either way.
TEST(DialBackVerdict, UdpIsJudgedApartAndAHelperThatDidNotTestUdpIsNoEvidence) {
  std::vector<std::string> tcp = {"198.51.100.7:7850"};
  std::vector<std::string> udp = {"198.51.100.7:7850", "203.0.113.2:40000"};
  DialBackAnswer laptop{"laptop", std::nullopt, {{"198.51.100.7:7850", true}},
                        {{"198.51.100.7:7850", false}, {"203.0.113.2:40000", false}}, true};
  DialBackAnswer old{"old", std::nullopt, {{"198.51.100.7:7850", true}}, {}, false};
  auto over_tcp = dial_back_verdict(tcp, true, {laptop, old}, Transport::kTcp);
  EXPECT_EQ(over_tcp.state, State::kReachable);
  EXPECT_EQ(over_tcp.confirmed_by, (std::vector<std::string>{"laptop", "old"}));
  auto over_udp = dial_back_verdict(udp, true, {laptop, old}, Transport::kUdp);
  EXPECT_EQ(over_udp.state, State::kUnreachable);
  EXPECT_EQ(over_udp.failed_by, (std::vector<std::string>{"laptop"}));
  EXPECT_EQ(over_udp.tested, udp);
  EXPECT_NE(over_udp.why.find("over UDP at 198.51.100.7:7850, 203.0.113.2:40000"), std::string::npos) << over_udp.why;
  EXPECT_NE(over_udp.why.find("link.udp_listen"), std::string::npos) << over_udp.why;

  auto only_old = dial_back_verdict(udp, true, {old}, Transport::kUdp);
  EXPECT_EQ(only_old.state, State::kUnknown);
  EXPECT_NE(only_old.why.find("old (did not dial over UDP"), std::string::npos) << only_old.why;

  DialBackAnswer cone{"club", std::nullopt, {}, {{"203.0.113.2:40000", true}}, true};
  auto reached = dial_back_verdict(udp, true, {laptop, cone}, Transport::kUdp);
  EXPECT_EQ(reached.state, State::kReachable);
  EXPECT_EQ(reached.address, "203.0.113.2:40000");
  EXPECT_EQ(reached.confirmed_by, (std::vector<std::string>{"club"}));
  EXPECT_EQ(reached.why, "reached over UDP at 203.0.113.2:40000 by club");
  // The TCP verdict does not read the UDP answers, nor the other way round.
  EXPECT_EQ(dial_back_verdict(tcp, true, {cone}, Transport::kTcp).state, State::kUnreachable);
  EXPECT_STREQ(transport_name(Transport::kUdp), "udp");
  EXPECT_STREQ(transport_name(Transport::kTcp), "tcp");
}

TEST(DialBackVerdict, NoUdpSocketOrNoPublicUdpAddressSaysWhichAndHowToFixIt) {
  auto off = dial_back_verdict({}, false, {}, Transport::kUdp);
  EXPECT_EQ(off.state, State::kUnknown);
  EXPECT_NE(off.why.find("link.hole_punching = false"), std::string::npos) << off.why;
  auto none = dial_back_verdict({}, true, {}, Transport::kUdp);
  EXPECT_NE(none.why.find("STUN"), std::string::npos) << none.why;
}

TEST(DialBackGate, ABurstThenOneEveryIntervalPerPeer) {
  DialBackGate gate;
  for (int i = 0; i < DialBackGate::kBurst; ++i) EXPECT_TRUE(gate.admit(dial_key(1), 2, kDialT0)) << i;
  auto over = gate.admit(dial_key(1), 2, kDialT0);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code(), ErrorCode::kResourceExhausted);
  // Another peer has its own bucket.
  EXPECT_TRUE(gate.admit(dial_key(2), 1, kDialT0));
  EXPECT_FALSE(gate.admit(dial_key(1), 1, kDialT0 + DialBackGate::kInterval - 1s));
  EXPECT_TRUE(gate.admit(dial_key(1), 1, kDialT0 + DialBackGate::kInterval));
}

TEST(DialBackGate, NoneOrTooManyAddressesIsRefusedWithoutSpendingAToken) {
  DialBackGate gate;
  for (size_t n : {size_t{0}, kMaxDialBackAddresses + 1, size_t{1000}}) {
    auto st = gate.admit(dial_key(1), n, kDialT0);
    ASSERT_FALSE(st) << n;
    EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
  }
  for (int i = 0; i < DialBackGate::kBurst; ++i) EXPECT_TRUE(gate.admit(dial_key(1), 1, kDialT0)) << i;
}

TEST(DialBackGate, UpToFourAddressesPerTransportAndOneInAll) {
  DialBackGate gate;
  EXPECT_TRUE(gate.admit(dial_key(1), kMaxDialBackAddresses, kDialT0, kMaxDialBackAddresses));
  EXPECT_TRUE(gate.admit(dial_key(1), 0, kDialT0, 1));  // UDP only
  for (auto [tcp, udp] : {std::pair<size_t, size_t>{0, 0}, {1, kMaxDialBackAddresses + 1}, {kMaxDialBackAddresses + 1, 0}}) {
    auto st = gate.admit(dial_key(2), tcp, kDialT0, udp);
    ASSERT_FALSE(st) << tcp << "/" << udp;
    EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().message().find("per transport"), std::string::npos) << st.error().message();
  }
}

// A peer's dial-back request cannot make us dial our own host, our LAN, or
// anything that is not a public IPv4 endpoint.
TEST(DialBackTarget, OnlyPublicIpv4EndpointsThatAreNotOurOwn) {
  std::vector<std::string> own = {"127.0.0.1", "192.168.1.20", "198.51.100.20"};
  EXPECT_TRUE(relay::check_dial_back_target("198.51.100.7:7850", own));
  for (const char* bad : {"127.0.0.1:22", "10.1.2.3:7850", "172.20.0.1:7850", "192.168.1.1:80", "100.64.1.1:7850",
                          "169.254.169.254:80", "224.0.0.1:7850", "0.0.0.0:7850", "255.255.255.255:7850",
                          "198.51.100.20:7850", "198.51.100.7", "198.51.100.7:0", "198.51.100.7:70000",
                          "example.com:7850", "[2001:db8::1]:7850", ""}) {
    auto st = relay::check_dial_back_target(bad, own);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied) << bad;
    EXPECT_NE(st.error().message().find("refused"), std::string::npos) << st.error().message();
  }
}

TEST(DialBackCorePurity, NoThreadsClocksSocketsOrDatabases) {
  const std::vector<std::string> banned = {"<thread>",   "<mutex>",     "<condition_variable>", "<future>",
                                           "<atomic>",   "asio",        "sqlite",               "base/clock.h",
                                           "<fstream>",  "<filesystem>", "<sys/",               "<unistd.h>",
                                           "os/",        "store/",      "peers/",               "spdlog",
                                           "nlohmann",   "api/",        "net/link/",            "portmap/"};
  std::set<std::string> files =
      testing::check_core_purity({"net/reach/dial_back_core.h", "net/reach/dial_back_core.cpp"}, banned);
  if (files.empty()) GTEST_SKIP() << "YONDER_SOURCE_DIR is not set (ctest sets it)";
  EXPECT_EQ(files, (std::set<std::string>{"net/reach/dial_back_core.h", "net/reach/dial_back_core.cpp",
                                          "crypto/node_id.h", "relay/path_hint.h", "base/bytes.h", "base/error.h",
                                          "base/token_bucket.h"}));
}

}  // namespace
}  // namespace yonder::reach
