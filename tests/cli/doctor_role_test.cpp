// What `yonder doctor` makes of a node's role and of its providers and
// relays (cli/doctor.h): pure judgements over the daemon's answers.
#include <gtest/gtest.h>

#include "cli/doctor.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

json peer_row(const std::string& name, const std::string& we_grant, const std::string& granted_to_us,
              bool denied = false) {
  json row = {{"node_id", name + "-id"}, {"name", name}, {"denied", denied}, {"grant", {{"capabilities", we_grant}}}};
  row["granted_to_us"] = granted_to_us.empty() ? json(nullptr) : json({{"capabilities", granted_to_us}});
  return row;
}

TEST(DoctorRole, ComesFromWhatThisNodeGrantsAndWasGranted) {
  json no_links = {{"links", json::array()}};
  auto consumer = doctor_role({{"peers", {peer_row("studio", "", "run,files")}}}, no_links);
  EXPECT_TRUE(consumer.consumer_only());
  EXPECT_EQ(consumer.text(), "consumer");
  auto provider = doctor_role({{"peers", {peer_row("laptop", "run", "")}}}, no_links);
  EXPECT_TRUE(provider.provides);
  EXPECT_FALSE(provider.consumes);
  auto both = doctor_role({{"peers", {peer_row("studio", "", "run"), peer_row("friend", "run", "")}}}, no_links);
  EXPECT_EQ(both.text(), "provider and consumer");
  // A link that can still be redeemed makes a provider; a used one does not.
  auto sharing = doctor_role({{"peers", {peer_row("studio", "", "run")}}},
                             {{"links", {{{"state", "active"}}, {{"state", "used"}}}}});
  EXPECT_FALSE(sharing.consumer_only());
  auto spent = doctor_role({{"peers", {peer_row("studio", "", "run")}}}, {{"links", {{{"state", "used"}}}}});
  EXPECT_TRUE(spent.consumer_only());
  // A denied peer counts for nothing; a fresh node is neither.
  EXPECT_EQ(doctor_role({{"peers", {peer_row("studio", "run", "run", true)}}}, no_links).text(),
            "new (shares and uses nothing yet)");
  EXPECT_EQ(doctor_role(json::object(), json(nullptr)).text(), "new (shares and uses nothing yet)");
}

TEST(DoctorPeerCheck, PassesWithThePathOrFailsWithWhatToDo) {
  json row = peer_row("studio", "", "run");
  row["path"] = "direct 127.0.0.1:7861";
  auto ok = peer_check(row, "");
  EXPECT_EQ(ok.name, "peer studio");
  EXPECT_EQ(ok.state, CheckState::kPass);
  EXPECT_EQ(ok.summary, "reachable, direct 127.0.0.1:7861");
  auto down = peer_check(row, "connection refused");
  EXPECT_EQ(down.state, CheckState::kFail);
  EXPECT_EQ(down.summary, "not reachable: connection refused");
  EXPECT_NE(down.fix.find("yonder peers studio"), std::string::npos) << down.fix;
}

TEST(DoctorRelayCheck, ARegisteredRelayPassesAnyOtherStateFails) {
  auto ok = relay_check({{"address", "127.0.0.1:7851"}, {"state", "registered"}, {"observed_addr", "192.0.2.4:5"}});
  EXPECT_EQ(ok.state, CheckState::kPass);
  EXPECT_EQ(ok.summary, "registered, it sees this node as 192.0.2.4:5");
  auto waiting = relay_check({{"address", "127.0.0.1:7851"}, {"state", "waiting"}, {"error", "timed out"}});
  EXPECT_EQ(waiting.state, CheckState::kFail);
  EXPECT_EQ(waiting.summary, "waiting: timed out");
  EXPECT_NE(waiting.fix.find("link.relays"), std::string::npos);
}

}  // namespace
}  // namespace yonder::cli
