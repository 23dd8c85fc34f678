// A yonderd that also relays for its own peers (relay.listen): two of its
// peers that cannot reach each other directly (one listens nowhere) pair and
// talk through it; nodes that are not its peers may visit to reach its peers
// but cannot meet each other there.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "support/job_node.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// `node`'s view of its relay, polled until `ok` holds (bounded).
json wait_relay(const Node& node, const std::function<bool(const json&)>& ok) {
  json last;
  wait_until(
      [&] {
        auto nc = node.yonder_json({"netcheck"});
        if (!nc.contains("relays") || nc["relays"].empty()) return false;
        last = nc["relays"][0];
        return ok(last);
      },
      120s, 100ms);
  return last;
}

// The relaying hub's netcheck entry for its relay (state "on" expected).
json relay_server(const Node& hub) { return hub.yonder_json({"netcheck"})["relay_server"]; }

// The hub's peers meeting at its relay: a studio that listens nowhere and a
// laptop, both registered there, the laptop paired with the studio (their
// link runs over the hub's relay).
void meet_at_the_hub(const Node& hub, const Node& studio, const Node& laptop) {
  studio.pair_with(hub, {"--scope", "run"});
  laptop.pair_with(hub, {"--scope", "run"});
  for (const Node* n : {&studio, &laptop}) {
    auto r = wait_relay(*n, [](const json& j) { return j.value("state", "") == "registered"; });
    ASSERT_EQ(r.value("state", ""), "registered") << r.dump();
  }
  auto share = studio.yonder_json({"share", "--scope", "run"});
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
}

// "ADDRESS@NODE_ID" of the hub's relay, for link.relays.
std::string pinned_relay(const json& relay) {
  return relay["address"].get<std::string>() + "@" + relay["node_id"].get<std::string>();
}

TEST(YonderdRelay, PeersOfTheRelayingNodeMeetThroughItAndStrangersCannotMeetThere) {
  TempDir dir;
  Node hub(dir, "hub", false, {{"YONDER_RELAY_LISTEN", "127.0.0.1:0"}});
  auto nc = hub.yonder_json({"netcheck"});
  ASSERT_EQ(nc["relay_server"].value("state", ""), "on") << nc.dump();
  std::string relay = nc["relay_server"]["address"];
  std::string pin = relay + "@" + nc["relay_server"]["node_id"].get<std::string>();

  Node studio(dir, "studio", false, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", pin}}, "[link]\nlisten = \"\"\n");
  Node laptop(dir, "laptop", false, {{"YONDER_LINK_RELAYS", pin}});
  Node stranger(dir, "stranger", false, {{"YONDER_LINK_RELAYS", pin}});
  Node stranger2(dir, "stranger2", false, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", pin}},
                 "[link]\nlisten = \"\"\n");
  // Both become the hub's peers; the relay then takes their registrations.
  studio.pair_with(hub, {"--scope", "run"});
  laptop.pair_with(hub, {"--scope", "run"});
  for (const Node* n : {&studio, &laptop}) {
    auto r = wait_relay(*n, [](const json& j) { return j.value("state", "") == "registered"; });
    EXPECT_EQ(r.value("state", ""), "registered") << r.dump();
  }
  // Two nodes that are not the hub's peers register as visitors (a visitor
  // may reach the hub's peers: those of a peer that named the relay in a
  // share link), but cannot meet each other there: pairing through it fails
  // and says why.
  for (const Node* n : {&stranger, &stranger2}) {
    auto r = wait_relay(*n, [](const json& j) { return j.value("state", "") == "registered"; });
    EXPECT_EQ(r.value("state", ""), "registered") << r.dump();
  }
  auto stranger_share = stranger2.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(stranger_share["relays"], json::array({relay})) << stranger_share.dump();
  auto refused = stranger.yonder({"pair", stranger_share["link"].get<std::string>()});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("peers of the node that runs it"), std::string::npos) << refused.err;

  // The studio listens nowhere: its link names only the hub's relay, and the
  // laptop pairs and reaches it there.
  auto share = studio.yonder_json({"share", "--scope", "run"});
  EXPECT_TRUE(share["addresses"].empty()) << share.dump();
  ASSERT_EQ(share["relays"], json::array({relay})) << share.dump();
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  auto ping = laptop.yonder({"ping", "studio", "--count", "3"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err << ping.out;
  auto peers = laptop.yonder_json({"peers"});
  bool relayed = false;
  for (const auto& p : peers["peers"]) {
    if (p.value("name", "") == "studio") relayed = p.value("path", "") == "relay via " + relay;
  }
  EXPECT_TRUE(relayed) << peers.dump();
  auto hub_nc = hub.yonder_json({"netcheck"});
  EXPECT_GE(hub_nc["relay_server"].value("pipes", 0), 1) << hub_nc.dump();
  // Both ends record which relay carried whom (once per change of relay;
  // the audit log is written off the event loop, so wait for it).
  for (const Node* n : {&studio, &laptop}) {
    json seen;
    bool recorded = wait_until([&] {
      json audit = n->yonder_json({"audit"});
      for (const auto& e : audit["entries"]) {
        if (e.value("action", "") == "trust.relay_use") seen = e;
      }
      return !seen.is_null();
    });
    ASSERT_TRUE(recorded) << "no trust.relay_use in the audit log: " << n->yonder_json({"audit"}).dump();
    EXPECT_EQ(seen.value("subject", ""), "relay via " + relay) << seen.dump();
  }
}

// The relaying node's limits (relay.peer_rate_mb, relay.total_rate_mb) hold
// for its peers' pipes: a bulk transfer through it takes at least what its
// rate allows, and netcheck shows the limits and the bytes relayed.
TEST(YonderdRelay, ABulkTransferThroughThePeersRelayIsHeldToItsRate) {
  TempDir dir;
  Node hub(dir, "hub", false,
           {{"YONDER_RELAY_LISTEN", "127.0.0.1:0"}, {"YONDER_RELAY_PEER_RATE_MB", "2"},
            {"YONDER_RELAY_TOTAL_RATE_MB", "3"}});
  auto rs = relay_server(hub);
  ASSERT_EQ(rs.value("state", ""), "on") << rs.dump();
  EXPECT_EQ(rs.value("peer_rate", 0.0), 2e6) << rs.dump();
  EXPECT_EQ(rs.value("total_rate", 0.0), 3e6) << rs.dump();
  const std::string pin = pinned_relay(rs);
  Node studio(dir, "studio", false, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", pin}}, "[link]\nlisten = \"\"\n");
  Node laptop(dir, "laptop", false, {{"YONDER_LINK_RELAYS", pin}});
  meet_at_the_hub(hub, studio, laptop);
  if (HasFatalFailure()) return;

  // 12 MiB from the laptop: after the relay's 4 MiB burst, at 2 MB/s at
  // least 4.2 s (15 % allowed for clock and token rounding); unlimited, the
  // same transfer takes a fraction of a second on loopback.
  constexpr double kBytes = 12.0 * 1024 * 1024;
  constexpr double kBurst = 4.0 * 1024 * 1024;
  auto speed = laptop.yonder_json({"speedtest", "studio", "--bytes", "12M"});
  ASSERT_TRUE(speed.contains("seconds")) << speed.dump();
  EXPECT_EQ(speed.value("bytes", 0.0), kBytes) << speed.dump();
  EXPECT_GE(speed.value("seconds", 0.0), 0.85 * (kBytes - kBurst) / 2e6) << speed.dump();
  auto after = relay_server(hub);
  EXPECT_GE(after.value("bytes_relayed", 0.0), kBytes) << after.dump();
  EXPECT_GT(after.value("throttled", 0), 0) << after.dump();
  auto text = hub.yonder({"netcheck"});
  EXPECT_NE(text.out.find("limits 1.9 MiB/s per peer, 2.9 MiB/s in all"), std::string::npos) << text.out;
}

// What the relay carried this month is kept in the state folder across a
// restart (relay.monthly_gb counts against it); a record that cannot be
// read is set aside, not trusted and not lost, and the count starts again.
TEST(YonderdRelay, TheMonthlyUsageIsKeptAcrossRestartsAndADamagedRecordIsSetAside) {
  TempDir dir;
  Node hub(dir, "hub", false, {{"YONDER_RELAY_LISTEN", "127.0.0.1:0"}, {"YONDER_RELAY_MONTHLY_GB", "3"}});
  auto rs = relay_server(hub);
  ASSERT_EQ(rs.value("state", ""), "on") << rs.dump();
  EXPECT_EQ(rs.value("monthly_cap", uint64_t{0}), 3'000'000'000ull) << rs.dump();
  EXPECT_EQ(rs.value("month_bytes", uint64_t{1}), 0u) << rs.dump();
  const std::string month = rs.value("month", "");
  const std::string pin = pinned_relay(rs);
  Node studio(dir, "studio", false, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", pin}}, "[link]\nlisten = \"\"\n");
  Node laptop(dir, "laptop", false, {{"YONDER_LINK_RELAYS", pin}});
  meet_at_the_hub(hub, studio, laptop);
  if (HasFatalFailure()) return;
  auto speed = laptop.yonder_json({"speedtest", "studio", "--bytes", "4M"});
  ASSERT_TRUE(speed.contains("bytes")) << speed.dump();
  auto before = relay_server(hub);
  const uint64_t carried = before.value("month_bytes", uint64_t{0});
  EXPECT_GE(carried, uint64_t{4} << 20) << before.dump();

  hub.restart();
  const std::string file = hub.home() + "/relay-usage.json";
  std::string kept;
  std::getline(std::ifstream(file), kept);
  EXPECT_NE(kept.find("\"month\":\"" + month + "\""), std::string::npos) << kept;
  auto after = relay_server(hub);
  EXPECT_GE(after.value("month_bytes", uint64_t{0}), carried) << after.dump();
  auto text = hub.yonder({"netcheck"});
  EXPECT_NE(text.out.find("this month"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("of 2.8 GiB (relay.monthly_gb)"), std::string::npos) << text.out;

  std::ofstream(file, std::ios::trunc) << "{\"month\": \"" << month << "\", \"bytes\": -5}\n";
  hub.restart();
  EXPECT_EQ(relay_server(hub).value("month_bytes", uint64_t{1}), 0u);
  std::string aside;
  std::getline(std::ifstream(file + ".damaged"), aside);
  EXPECT_NE(aside.find("-5"), std::string::npos) << "the damaged record is kept aside: " << aside;
  EXPECT_NE(hub.daemon().log().find("set aside"), std::string::npos) << hub.daemon().log();
}

}  // namespace
}  // namespace yonder::testing
