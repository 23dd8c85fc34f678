// Share links pin the provider's relays by key (format v2): real yonderd
// nodes and real yonder-relay processes on loopback.
//   - The provider puts in a link only relays whose key it knows (pinned in
//     link.relays, or proved by the relay's TLS handshake) and says which
//     it left out.
//   - A consumer pairs through the provider's relay with the link's key
//     pinned, and stores the key with the relay's address; when another
//     relay (another key) takes over that address, a new consumer's pairing
//     is refused with an error naming both keys, and the first consumer's
//     later dials refuse it too.
//   - An old (v1) link's relays carry no key: the consumer does not use them.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/bytes.h"
#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "crypto/share_link.h"
#include "support/job_node.h"
#include "support/live_process.h"
#include "support/relay_process.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A link in format v1 (what a yonder from before v2 wrote: its relays are
// "relay:" address entries without a key), signed by `provider`.
std::string v1_link(const Identity& provider, const std::string& relay_address) {
  Bytes b = {1};
  auto put = [&](ByteView v) { b.insert(b.end(), v.begin(), v.end()); };
  auto be = [&](uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(provider.public_key());
  b.insert(b.end(), 16 + 32, 7);  // link id, secret
  be(static_cast<uint64_t>(std::time(nullptr) + 3600), 8);
  be(1, 2);                                                  // uses
  b.insert(b.end(), {1, 0, 0, 1});                           // run, no egress, 1 GPU
  b.insert(b.end(), 8 + 4 + 2 + 4 + 8 + 8, 0);               // vram .. disk
  std::string entry = "relay:" + relay_address;
  b.push_back(1);
  b.push_back(static_cast<uint8_t>(entry.size()));
  put(as_bytes(entry));
  b.push_back(0);  // no name
  std::string label = "yonder-share-link-v1";
  Bytes msg(label.begin(), label.end());
  msg.insert(msg.end(), b.begin(), b.end());
  put(provider.sign(msg));
  std::string s = base64_encode(b);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return "yonder://" + s;
}

TEST(RelayPinning, AProviderNamesOnlyRelaysWhoseKeyItKnows) {
  TempDir dir;
  Relay relay = start_relay(dir / "relay.key", "127.0.0.1:0");
  ASSERT_FALSE(relay.node.empty()) << relay.process->output();
  // Neither relay is pinned: the first one proves its key by answering;
  // nothing listens on the second (port 1 of loopback refuses).
  Node studio(dir, "studio", false, {{"YONDER_LINK_RELAYS", relay.listen + ",127.0.0.1:1"}});
  ASSERT_TRUE(wait_until([&] { return registered(studio, relay.listen); })) << studio.yonder({"netcheck"}).out;

  auto share = studio.yonder({"share", "--scope", "run", "--no-qr"});
  ASSERT_EQ(share.exit_code, 0) << share.err;
  EXPECT_NE(share.err.find("relay 127.0.0.1:1 left out: its key is not known yet"), std::string::npos) << share.err;
  EXPECT_NE(share.err.find("link.relays = 127.0.0.1:1@NODE_ID"), std::string::npos) << share.err;
  EXPECT_EQ(share.err.find("relay " + relay.listen + " left out"), std::string::npos) << share.err;

  auto j = studio.yonder_json({"share", "--scope", "run"});
  EXPECT_EQ(j["relays"], json::array({relay.listen})) << j.dump();
  ASSERT_EQ(j["relays_left_out"].size(), 1u) << j.dump();
  EXPECT_EQ(j["relays_left_out"][0].value("address", ""), "127.0.0.1:1");
  // The link carries the key the relay's handshake proved.
  auto link = decode_share_link(j["link"].get<std::string>());
  ASSERT_TRUE(link.ok()) << link.error().to_string();
  ASSERT_EQ(link->relays.size(), 1u);
  ASSERT_TRUE(link->relays[0].key.has_value());
  EXPECT_EQ(NodeId(*link->relays[0].key).to_string(), relay.node);
}

TEST(RelayPinning, AConsumerRefusesARelayThatCannotProveTheKeyInTheLink) {
  TempDir dir;
  Relay relay = start_relay(dir / "relay.key", "127.0.0.1:0");
  ASSERT_FALSE(relay.node.empty()) << relay.process->output();
  // The studio listens nowhere: its relay is the only way to it. The
  // consumers configure no relay: they know only what the link says.
  Node studio(dir, "studio", false, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", relay.pinned()}},
              "[link]\nlisten = \"\"\n");
  Node laptop(dir, "laptop", false);
  ASSERT_TRUE(wait_until([&] { return registered(studio, relay.listen); })) << studio.yonder({"netcheck"}).out;

  auto share = studio.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(share["relays"], json::array({relay.listen})) << share.dump();
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  auto ping = laptop.yonder({"ping", "studio", "--count", "1"});
  EXPECT_EQ(ping.exit_code, 0) << ping.err << ping.out;
  // The consumer keeps the relay with its key, for every later dial.
  auto peers = laptop.yonder_json({"peers"});
  ASSERT_EQ(peers["peers"].size(), 1u) << peers.dump();
  EXPECT_EQ(peers["peers"][0]["addresses"], json::array({"relay:" + relay.pinned()})) << peers.dump();
  EXPECT_EQ(peers["peers"][0].value("path", ""), "relay via " + relay.listen) << peers.dump();

  // A second link, for a second consumer. Then the provider's relay goes,
  // and another relay (another key) takes its address.
  auto share2 = studio.yonder_json({"share", "--scope", "run"});
  relay.process->signal(SIGTERM);
  ASSERT_EQ(relay.process->wait(20s), 0) << relay.process->output();
  Relay impostor = start_relay(dir / "impostor.key", relay.listen);
  ASSERT_EQ(impostor.listen, relay.listen) << impostor.process->output();
  ASSERT_NE(impostor.node, relay.node);

  Node tablet(dir, "tablet", false);
  auto refused = tablet.yonder({"pair", share2["link"].get<std::string>()});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  // The error names the key the relay proved and the one the link names.
  EXPECT_NE(refused.err.find("proved key " + impostor.node), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(relay.node), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("share link"), std::string::npos) << refused.err;
  EXPECT_EQ(tablet.yonder_json({"peers"})["peers"].size(), 0u);
  EXPECT_NE(relay_entry(tablet, relay.listen).value("state", ""), "registered");

  // The first consumer redials the relay it stored, with the stored key:
  // the impostor is refused there too.
  json entry;
  bool seen = wait_until([&] {
    entry = relay_entry(laptop, relay.listen);
    return entry.value("error", "").find("proved key " + impostor.node) != std::string::npos;
  });
  EXPECT_TRUE(seen) << entry.dump();
  EXPECT_NE(entry.value("state", ""), "registered") << entry.dump();
}

// An old link's relays carry no key: the consumer does not connect to them
// (not even to ask), and says how to pin one.
TEST(RelayPinning, AConsumerDoesNotUseTheKeylessRelaysOfAVersion1Link) {
  TempDir dir;
  Relay relay = start_relay(dir / "relay.key", "127.0.0.1:0");
  ASSERT_FALSE(relay.node.empty()) << relay.process->output();
  auto provider = Identity::generate().value();
  std::string link = v1_link(provider, relay.listen);
  auto decoded = decode_share_link(link);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  ASSERT_EQ(decoded->version, 1);

  Node laptop(dir, "laptop", false);
  auto refused = laptop.yonder({"pair", link});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("old format (v1)"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("link.relays = " + relay.listen + "@NODE_ID"), std::string::npos) << refused.err;
  EXPECT_TRUE(relay_entry(laptop, relay.listen).is_null()) << laptop.yonder({"netcheck"}).out;
}

}  // namespace
}  // namespace yonder::testing
