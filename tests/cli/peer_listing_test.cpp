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

}  // namespace
}  // namespace yonder::cli
