#include "cli/peer_listing.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "crypto/scope.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

TEST(PeersTable, ShowsWhatEachSideGrantedAndAConnectedPeerIsSeenNow) {
  Scope granted;
  granted.capabilities = *parse_capabilities("run,exec,forward,files");
  granted.gpus = 1;
  granted.max_time_s = 7200;
  json peers = json::array({
      {{"name", "studio"},
       {"node_id", "ab12cd34ef"},
       {"connected", true},
       {"last_seen_at", nullptr},
       {"grant_summary", "nothing"},
       {"granted_to_us", scope_to_json(granted)},
       {"path", "direct"}},
      {{"name", "laptop"},
       {"node_id", "ff0011aa"},
       {"connected", false},
       {"last_seen_at", nullptr},
       {"grant_summary", "run; 1 GPU"},
       {"granted_to_us", nullptr}},
  });
  std::string t = peers_table(peers);
  auto studio = t.substr(t.find("studio"), t.find("laptop") - t.find("studio"));
  EXPECT_NE(studio.find("connected  now"), std::string::npos) << studio;
  EXPECT_EQ(studio.find("never"), std::string::npos) << studio;
  EXPECT_NE(studio.find("we may (there): run,exec,forward,files; 1 GPU, 2h"), std::string::npos) << t;
  auto laptop = t.substr(t.find("laptop"));
  EXPECT_NE(laptop.find("never"), std::string::npos) << laptop;
  EXPECT_EQ(laptop.find("we may"), std::string::npos) << "it granted us nothing: " << laptop;
}

TEST(PeerDetail, ShowsThePairingsCheckDigitsAndWhatEachSideMayDo) {
  Scope granted;
  granted.capabilities = *parse_capabilities("run,files");
  granted.gpus = 1;
  json peer = {{"name", "studio"},
               {"node_id", "ab12cd34ef"},
               {"connected", true},
               {"paired_at", 1700000000},
               {"check_digits", "123 456 789"},
               {"grant_summary", "nothing"},
               {"granted_to_us", scope_to_json(granted)},
               {"addresses", json::array({"192.0.2.7:7861", "bad\x1b[2Jaddress"})},
               {"path", "direct"},
               {"rtt_ms", 1.25}};
  std::string d = peer_detail(peer);
  EXPECT_NE(d.find("Check digits  123 456 789"), std::string::npos) << d;
  EXPECT_NE(d.find("They may here nothing"), std::string::npos) << d;
  EXPECT_NE(d.find("We may there  run,files; 1 GPU"), std::string::npos) << d;
  EXPECT_NE(d.find("Path          direct (1.2 ms)"), std::string::npos) << d;
  EXPECT_NE(d.find("Last seen     now"), std::string::npos) << d;
  EXPECT_EQ(d.find('\x1b'), std::string::npos) << "a peer's addresses reach the terminal escaped: " << d;

  // A pin from before check digits were kept says so instead of a blank.
  peer.erase("check_digits");
  peer["connected"] = false;
  peer["last_seen_at"] = nullptr;
  d = peer_detail(peer);
  EXPECT_NE(d.find("paired before check digits were kept"), std::string::npos) << d;
  EXPECT_NE(d.find("Last seen     never"), std::string::npos) << d;
  EXPECT_EQ(d.find("Path"), std::string::npos) << "no path while idle: " << d;
}

TEST(ShareReach, ALinkOnlyThisHostOrThisNetworkReachesSaysSoAndHowToFixIt) {
  auto loop = share_reach_warning({"127.0.0.1:7850"}, {});
  EXPECT_NE(loop.find("reaches only this machine"), std::string::npos) << loop;
  EXPECT_NE(loop.find("link.listen"), std::string::npos) << loop;
  auto lan = share_reach_warning({"192.168.1.5:7850", "10.0.0.2:7850", "[fd00::1]:7850", "127.0.0.1:7850"}, {});
  EXPECT_NE(lan.find("only private addresses"), std::string::npos) << lan;
  EXPECT_NE(lan.find("link.relays"), std::string::npos) << lan;
  EXPECT_EQ(share_reach_warning({"192.168.1.5:7850", "203.0.113.7:7850"}, {}), "") << "a public address";
  EXPECT_EQ(share_reach_warning({"studio.example.org:7850"}, {}), "") << "a host name may be public";
  EXPECT_EQ(share_reach_warning({"127.0.0.1:7850"}, {"relay.example.org:7851"}), "") << "a relay";
  EXPECT_NE(share_reach_warning({"100.101.102.103:7850"}, {}).find("Tailscale"), std::string::npos);
}

TEST(LinksTable, SaysHowManyUsesAreSpentOfHowMany) {
  std::string t = links_table(json::array({{{"id", "l1"}, {"state", "active"}, {"uses_left", 1}, {"uses_total", 1},
                                            {"expires_at", 0}, {"summary", "run"}},
                                           {{"id", "l2"}, {"state", "used"}, {"uses_left", 0}, {"uses_total", 3},
                                            {"expires_at", 0}, {"summary", "run"}}}));
  EXPECT_NE(t.find("USED"), std::string::npos) << t;
  EXPECT_NE(t.find("0 of 1"), std::string::npos) << t;
  EXPECT_NE(t.find("3 of 3"), std::string::npos) << t;
}

TEST(NewlyPaired, IsTheNewPeerOrTheOnePairedAgain) {
  nlohmann::json before = {{"peers",
                            {{{"node_id", "a"}, {"paired_at", 10}, {"check_digits", "111 111 111"}},
                             {{"node_id", "b"}, {"paired_at", 20}, {"check_digits", "222 222 222"}}}}};
  EXPECT_TRUE(newly_paired(before, before).is_null());
  auto with_c = before;
  with_c["peers"].push_back({{"node_id", "c"}, {"paired_at", 30}, {"check_digits", "333 333 333"}});
  EXPECT_EQ(newly_paired(before, with_c)["node_id"], "c");
  auto again = before;
  again["peers"][0]["paired_at"] = 40;
  again["peers"][0]["check_digits"] = "444 444 444";
  EXPECT_EQ(newly_paired(before, again)["node_id"], "a");
  EXPECT_EQ(newly_paired(nlohmann::json(), with_c)["node_id"], "c");  // the last of those that are new
}

}  // namespace
}  // namespace yonder::cli
