// Reach end to end in the NAT lab (scripts/natlab.sh): real yonderd nodes
// in the lab's homes, a real yonder-relay on the public router, real jobs on
// the real dockerd.
//   - Behind two NATs (every mode pair), a provider that listens nowhere is
//     paired and runs a job with logs through the relay, which sees no
//     plaintext (its own byte dump holds none of a marker the job carries).
//   - A relayed link moves to the LAN path when the peers find each other,
//     while a job's log stream goes on without a gap.
//   - A relayed link moves to a mapped port when home A's router starts
//     forwarding (a real miniupnpd comes up in it), again without a gap.
//   - Killing the relay on a relayed path: the link comes back through the
//     restarted relay and the logs resume from the provider; on a direct
//     path nothing notices.
//   - A consumer that changes networks mid-job (natlab.sh move) keeps its
//     `logs -f` stream: the link comes back from the new address.
//   - With no relay configured anywhere, two homes behind NATs meet at a
//     third home's node that peers confirmed reachable and that offers its
//     relay (relay.offer), and its limits hold.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/lab_gateway.h"
#include "support/live_process.h"
#include "support/nat_lab.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";
constexpr int kRelayPort = 7851;

// A yonder-relay on the lab's public router; restartable with the same key
// and address (nodes pin its key).
class LabRelay {
 public:
  // `second`: on the public router's second address (198.18.0.2), with its own key.
  LabRelay(const NatLab& lab, const TempDir& dir, bool second = false)
      : lab_(lab), dir_(dir), name_(second ? "relay2" : "relay"), second_(second) {
    start();
  }
  void start() {
    proc_ = std::make_unique<LiveProcess>(
        std::vector<std::string>{ip_program(), "netns", "exec", lab_.netns("pub"), program_path("yonder-relay"),
                                 "--listen", address(), "--metrics", "off", "--key-file", dir_ / (name_ + ".key"),
                                 "--dump", dump_path(), "--log-level", "debug"},
        Env{});
    ASSERT_TRUE(proc_->wait_for("listen ", 20s)) << proc_->output();
    std::string out = proc_->out();
    size_t at = out.find("node ");
    ASSERT_NE(at, std::string::npos) << out;
    node_id_ = out.substr(at + 5, out.find('\n', at) - at - 5);
  }
  void kill() {
    proc_->signal(SIGKILL);
    proc_->wait(10s);
  }
  std::string address() const {
    return (second_ ? lab_.server2_address() : lab_.server_address()) + ":" + std::to_string(kRelayPort);
  }
  std::string pinned() const { return address() + "@" + node_id_; }
  std::string dump_path() const { return dir_ / (name_ + ".dump"); }
  std::string dump() const {
    std::ifstream in(dump_path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string log() const { return proc_ ? proc_->output() : ""; }

 private:
  const NatLab& lab_;
  const TempDir& dir_;
  std::string name_;
  bool second_ = false;
  std::unique_ptr<LiveProcess> proc_;
  std::string node_id_;
};

DaemonStarter in_lab(const NatLab& lab, std::string node) {
  return [&lab, node](const Env& env) { return lab.daemon_in(node, env); };
}

// The consumer's view of its only peer, polled until `ok` holds (or 120 s:
// a punched path and its first RTT take long under the sanitizers).
json wait_peer(const Node& node, const std::function<bool(const json&)>& ok) {
  json last;
  wait_until(
      [&] {
        auto peers = node.yonder_json({"peers"});
        if (!peers.contains("peers") || peers["peers"].empty()) return false;
        last = peers["peers"][0];
        return ok(last);
      },
      120s, 100ms);
  return last;
}

std::string random_marker() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string out = "marker-";
  for (int i = 0; i < 12; ++i) out += "0123456789abcdef"[static_cast<uint8_t>(urandom.get()) % 16];
  return out;
}

// A job on "studio" printing tick-0..tick-(n-1), one every 0.1 s, followed
// by `yonder logs -f` from `consumer` until its first lines arrived; nullptr
// (the failure recorded) if it did not get that far.
std::unique_ptr<LiveProcess> follow_ticking_job(const Node& consumer, int n) {
  auto d = consumer.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                            "i=0; while [ $i -lt " + std::to_string(n) +
                                " ]; do echo tick-$i; i=$((i+1)); sleep 0.1; done"});
  if (d.exit_code != 0) {
    ADD_FAILURE() << "the job did not start: " << d.err;
    return nullptr;
  }
  std::string job = d.out.substr(0, d.out.find('\n'));
  auto follow =
      std::make_unique<LiveProcess>(std::vector<std::string>{program_path("yonder"), "logs", "-f", job}, consumer.env());
  if (!follow->wait_for("tick-5\n", 60s)) {
    ADD_FAILURE() << "no log lines: " << follow->output();
    return nullptr;
  }
  return follow;
}

class ReachLab : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_SKIP_WITHOUT_NAT_LAB();
    YONDER_REQUIRE_DOCKER_OR_SKIP();
  }
};

class ReachLabNats : public ::testing::TestWithParam<std::pair<NatMode, NatMode>> {
 protected:
  void SetUp() override {
    YONDER_SKIP_WITHOUT_NAT_LAB();
    YONDER_REQUIRE_DOCKER_OR_SKIP();
  }
};

// Both peers behind NATs; the provider (b1) listens on no port at all and
// is reached only through the relay, for pairing and for the job.
TEST_P(ReachLabNats, PairAndRunAJobThroughTheRelayWithNoInboundPort) {
  auto [mode_a, mode_b] = GetParam();
  NatLab lab({.nat_a = mode_a, .nat_b = mode_b});
  TempDir dir;
  LabRelay relay(lab, dir);
  Node studio(dir, "studio", true,
              {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", relay.pinned()}, {"YONDER_API_LISTEN", "off"}},
              "[link]\nlisten = \"\"\n", in_lab(lab, "b1"));
  Node laptop(dir, "laptop", false, {}, "", in_lab(lab, "a1"));

  // No listening socket in b1's namespace, where the provider runs (its
  // local API on the unix socket only).
  auto listening = lab.run_in("b1", {"ss", "-Hltn"});
  EXPECT_EQ(listening.out, "") << "the provider listens: " << listening.out;

  auto share = studio.yonder_json({"share", "--scope", "run"});
  EXPECT_TRUE(share["addresses"].empty()) << share.dump();
  EXPECT_EQ(share["relays"], json::array({relay.address()})) << share.dump();
  const auto pairing_at = std::chrono::steady_clock::now();
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err << "\nrelay:\n" << relay.log();
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();
  EXPECT_EQ(peer.value("path", ""), "relay via " + relay.address()) << peer.dump();

  // A real job: an uploaded file and its output cross the relay.
  std::string marker = random_marker();
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/payload.txt") << marker << "-in-a-file\n";
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--", "sh", "-c",
                          "cat payload.txt; for i in 1 2 3; do echo " + marker + "-line-$i; done; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  std::cout << "[ first job] " << nat_mode_name(mode_a) << "/" << nat_mode_name(mode_b) << ", one relay: "
            << peer.value("path_kind", "") << ", pair to first job's end "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - pairing_at).count() << " s\n";
  EXPECT_NE(r.out.find(marker + "-in-a-file\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(marker + "-line-3\n"), std::string::npos) << r.out;
  auto ps = laptop.yonder_json({"ps", "--all"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();

  // The relay carried the session (its dump is large) and saw no plaintext.
  std::string dump = relay.dump();
  EXPECT_GT(dump.size(), 4096u);
  EXPECT_EQ(dump.find(marker), std::string::npos) << "the relay saw plaintext";
  EXPECT_EQ(dump.find("payload.txt"), std::string::npos) << "the relay saw a file name";

  // netcheck on each side: registered, seen at its home's public address,
  // with the NAT behaviour of its home.
  auto expect_nat = [&](const Node& node, NatMode mode, const std::string& nat_key) {
    json nc;
    std::string want = mode == NatMode::kPreserving ? "port_preserving" : "symmetric";
    EXPECT_TRUE(wait_until(
        [&] {
          nc = node.yonder_json({"netcheck"});
          return nc.value("nat", "") == want;
        },
        120s, 100ms))
        << "netcheck never saw the NAT as " << want;
    EXPECT_EQ(nc.value("nat", ""), want) << nc.dump();
    EXPECT_EQ(nc.value("public_addr", "").rfind(lab.address(nat_key) + ":", 0), 0u) << nc.dump();
  };
  expect_nat(laptop, mode_a, "nat-a");
  expect_nat(studio, mode_b, "nat-b");
}

INSTANTIATE_TEST_SUITE_P(EveryNatPair, ReachLabNats,
                         ::testing::Values(std::make_pair(NatMode::kPreserving, NatMode::kPreserving),
                                           std::make_pair(NatMode::kPreserving, NatMode::kSymmetric),
                                           std::make_pair(NatMode::kSymmetric, NatMode::kSymmetric)),
                         [](const auto& param_info) {
                           return std::string(nat_mode_name(param_info.param.first)) + "_" +
                                  nat_mode_name(param_info.param.second);
                         });

// The job's lines 0..n-1, each exactly once and in order, in `out`.
void expect_lines_once_in_order(const std::string& out, const std::string& tag, int n) {
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    std::string line = tag + "-" + std::to_string(i) + "\n";
    size_t found = out.find(line, at);
    ASSERT_NE(found, std::string::npos) << "line " << i << " missing or out of order:\n" << out;
    EXPECT_EQ(out.find(line, found + line.size()), std::string::npos) << "line " << i << " repeated";
    at = found + line.size();
  }
}

// a1 and a2 share home A's LAN, but the provider's share link names only
// the relay (its advertised address is a closed port) and multicast is
// blocked in a2 at first: the link starts on the relay. With a job's
// `logs -f` running, the block goes, `yonder netcheck` asks the LAN again,
// the peers find each other and the link moves to the LAN: no line lost or
// repeated, no lost contact.
TEST_F(ReachLab, ARelayedLinkMovesToTheLanWhileLogsFollow) {
  NatLab lab;
  TempDir dir;
  LabRelay relay(lab, dir);
  std::vector<std::vector<std::string>> block = {
      {"iptables", "-I", "INPUT", "-p", "udp", "--dport", "47777", "-j", "DROP"},
      {"iptables", "-I", "OUTPUT", "-p", "udp", "--dport", "47777", "-j", "DROP"}};
  for (const auto& rule : block) ASSERT_EQ(lab.run_in("a2", rule).exit_code, 0);
  Env lan = {{"YONDER_LOG_LEVEL", "debug"}, {"YONDER_LINK_LISTEN", "0.0.0.0:0"}, {"YONDER_LINK_RELAYS", relay.pinned()},
             {"YONDER_LINK_LAN_DISCOVERY", "true"}};
  Env provider_env = lan;
  provider_env["YONDER_LINK_ADVERTISE"] = lab.address("a1") + ":1";  // nothing listens there
  Node studio(dir, "studio", true, provider_env, "", in_lab(lab, "a1"));
  Node laptop(dir, "laptop", false, lan, "", in_lab(lab, "a2"));
  auto share = studio.yonder_json({"share", "--scope", "run"});
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  ASSERT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();

  auto following = follow_ticking_job(laptop, 60);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;

  for (auto rule : block) {
    rule[1] = "-D";
    ASSERT_EQ(lab.run_in("a2", rule).exit_code, 0);
  }
  auto nc = laptop.yonder_json({"netcheck"});
  EXPECT_EQ(nc["lan_discovery"].value("state", "").rfind("on", 0), 0u) << nc.dump();
  peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "lan"; });
  ASSERT_EQ(peer.value("path_kind", ""), "lan") << peer.dump() << "\n" << laptop.daemon().log();
  EXPECT_NE(peer.value("path", "").find(lab.address("a1") + ":"), std::string::npos) << peer.dump();

  EXPECT_EQ(follow.wait(60s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 60);
  EXPECT_EQ(follow.err().find("lost contact"), std::string::npos) << follow.err() << "\n" << laptop.daemon().log() << "\nSTUDIO\n" << studio.daemon().log();
  // The old relayed session drained and closed once its last request ended.
  peer = wait_peer(laptop, [](const json& p) { return p["paths"].size() == 1; });
  EXPECT_EQ(peer["paths"].size(), 1u) << peer.dump();
}

// A provider in b1 (home B, symmetric NAT) that listens nowhere and a
// consumer in a1 (home A, port-preserving), paired through one relay.
struct RelayedPair {
  RelayedPair()
      : lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric}),
        relay(lab, dir),
        studio(dir, "studio", true, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_RELAYS", relay.pinned()}},
               "[link]\nlisten = \"\"\n", in_lab(lab, "b1")),
        laptop(dir, "laptop", false, {}, "", in_lab(lab, "a1")) {}
  void pair() {
    auto share = studio.yonder_json({"share", "--scope", "run"});
    ASSERT_EQ(laptop.yonder({"pair", share["link"].get<std::string>()}).exit_code, 0);
  }
  NatLab lab;
  TempDir dir;
  LabRelay relay;
  Node studio, laptop;
};

// A relayed link with a job running: the relay dies (SIGKILL) and comes
// back; the consumer's link reconnects through it and `logs -f` resumes
// from the provider's log: every line once, in order.
TEST_F(ReachLab, KillingTheRelayOnARelayedPathReconnectsAndLogsResume) {
  RelayedPair rp;
  rp.pair();
  if (HasFatalFailure()) return;
  auto& [lab, dir, relay, studio, laptop] = rp;

  auto following = follow_ticking_job(laptop, 80);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;
  relay.kill();
  ASSERT_TRUE(follow.wait_for("lost contact with the provider", 30s)) << follow.output();
  relay.start();
  ASSERT_TRUE(follow.wait_for("reconnected", 60s)) << follow.output() << "\nrelay:\n" << relay.log();
  EXPECT_EQ(follow.wait(60s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 80);
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();
}

// Roaming: the laptop changes networks mid-job (natlab.sh move: its cable
// goes from home A's router to home B's, so it is seen from another public
// address and its connections through home A's NAT are gone). Its link
// comes back through the relay from the new address, and `logs -f` goes on:
// every line once, in order. No new share link, nothing paired again.
TEST_F(ReachLab, AConsumerThatChangesNetworksMidJobKeepsItsLogStream) {
  RelayedPair rp;
  rp.pair();
  if (HasFatalFailure()) return;
  const NatLab& lab = rp.lab;  // references, not bindings: the lambdas below capture them
  LabRelay& relay = rp.relay;
  Node& laptop = rp.laptop;
  auto seen_from = [&] {
    const json nc = laptop.yonder_json({"netcheck"});
    return nc.value("public_addr", "");
  };
  ASSERT_EQ(seen_from().rfind(lab.address("nat-a") + ":", 0), 0u);

  auto following = follow_ticking_job(laptop, 80);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;
  const auto moved_at = std::chrono::steady_clock::now();
  lab.move_host("a1", "nat-b");
  EXPECT_EQ(follow.wait(120s), 0) << follow.output() << "\nLAPTOP\n" << laptop.daemon().log();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - moved_at).count();
  expect_lines_once_in_order(follow.out(), "tick", 80);
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();
  std::string now_seen;
  EXPECT_TRUE(wait_until(
      [&] {
        now_seen = seen_from();
        return now_seen.rfind(lab.address("nat-b") + ":", 0) == 0;
      },
      60s, 200ms))
      << now_seen;
  std::cout << "[ roaming  ] moved to home B -> logs -f ended with every line " << took
            << " s after the move (the job prints for 8 s)\n";
  // The move did cut the link: its session through home A's NAT ended.
  EXPECT_NE(laptop.daemon().log().find("(relay via " + relay.address() + ") ended"), std::string::npos)
      << laptop.daemon().log();
}

// On a direct path the relay is only a standby: killing it mid-job changes
// nothing for the session (no reconnect, no lost contact, every line).
TEST_F(ReachLab, KillingTheRelayOnADirectPathDoesNotDropTheSession) {
  NatLab lab;
  TempDir dir;
  LabRelay relay(lab, dir);
  Env env = {{"YONDER_LINK_LISTEN", "0.0.0.0:0"}, {"YONDER_LINK_RELAYS", relay.pinned()}};
  Node studio(dir, "studio", true, env, "", in_lab(lab, "a1"));
  // Its share link names its LAN address, which a2 reaches directly.
  Node laptop(dir, "laptop", false, env, "", in_lab(lab, "a2"));
  auto share = studio.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(laptop.yonder({"pair", share["link"].get<std::string>()}).exit_code, 0);
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  ASSERT_EQ(peer.value("path_kind", ""), "direct") << peer.dump();

  auto following = follow_ticking_job(laptop, 40);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;
  std::string path_before = peer.value("path", "");
  relay.kill();
  EXPECT_EQ(follow.wait(60s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 40);
  EXPECT_EQ(follow.err().find("lost contact"), std::string::npos) << follow.err();
  auto after = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(after.value("path", ""), path_before) << after.dump();
}

// Home A's router has no gateway daemon at first: the provider in a1 asks
// for a port mapping in vain, and the consumer in home B (which cannot reach
// a1's LAN address) is paired through the relay. With a job's `logs -f`
// running, miniupnpd comes up in nat-a; `yonder netcheck` makes the provider
// ask again, it gets the mapping and tells the consumer over the relay (a
// path hint); the consumer dials nat-a's public address and the link moves
// there: no line lost or repeated, no lost contact. When the provider stops,
// it removes the mapping from the router.
TEST_F(ReachLab, ARelayedLinkMovesToAMappedPortWhileLogsFollow) {
  if (auto why = LabGateway::unavailable_reason()) FAIL() << *why;
  NatLab lab;
  TempDir dir;
  LabRelay relay(lab, dir);
  Node studio(dir, "studio", true,
              {{"YONDER_LOG_LEVEL", "debug"},
               {"YONDER_LINK_LISTEN", "0.0.0.0:0"},
               {"YONDER_LINK_RELAYS", relay.pinned()},
               {"YONDER_LINK_PORT_MAPPING", "true"}},
              "", in_lab(lab, "a1"));
  Node laptop(dir, "laptop", false, {{"YONDER_LOG_LEVEL", "debug"}}, "", in_lab(lab, "b1"));
  auto share = studio.yonder_json({"share", "--scope", "run"});
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err << "\n" << laptop.daemon().log();
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  ASSERT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();

  auto following = follow_ticking_job(laptop, 60);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;

  // netcheck's "port_mapping" (an empty object if netcheck failed: its
  // failure is reported by yonder_json).
  auto port_mapping = [](const json& nc) {
    return nc.is_object() && nc.contains("port_mapping") ? nc["port_mapping"] : json::object();
  };
  // No gateway yet: no mapping. The first round of asking the router (NAT-
  // PMP refused, then a 2 s SSDP search) may still run: "mapping".
  auto nc = studio.yonder_json({"netcheck"});
  std::string state = port_mapping(nc).value("state", "");
  EXPECT_TRUE(state == "unavailable" || state == "mapping") << nc.dump();
  if (state == "unavailable") {
    EXPECT_NE(port_mapping(nc).value("reason", "").find("no UPnP-IGD or NAT-PMP gateway answered"), std::string::npos)
        << nc.dump();
  }

  LabGateway gateway(lab, "nat-a");
  // Each netcheck makes the provider ask the router again at once.
  EXPECT_TRUE(wait_until(
      [&] {
        nc = studio.yonder_json({"netcheck"});
        return port_mapping(nc).value("state", "") == "mapped";
      },
      120s, 200ms))
      << "the provider never mapped a port on the gateway";
  ASSERT_EQ(port_mapping(nc).value("state", ""), "mapped") << nc.dump() << "\ngateway:\n" << gateway.log();
  std::string mapped = port_mapping(nc).value("external", "");
  EXPECT_EQ(mapped.rfind(lab.address("nat-a") + ":", 0), 0u) << nc.dump();
  std::string port = mapped.substr(mapped.rfind(':') + 1);

  peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "mapped"; });
  ASSERT_EQ(peer.value("path_kind", ""), "mapped") << peer.dump() << "\nLAPTOP\n"
                                                   << laptop.daemon().log() << "\nSTUDIO\n"
                                                   << studio.daemon().log();
  EXPECT_EQ(peer.value("path", ""), "mapped to " + mapped) << peer.dump();

  EXPECT_EQ(follow.wait(60s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 60);
  EXPECT_EQ(follow.err().find("lost contact"), std::string::npos) << follow.err() << "\nLAPTOP\n"
                                                                  << laptop.daemon().log() << "\nSTUDIO\n"
                                                                  << studio.daemon().log();
  // The old relayed session drained and closed once its last request ended.
  peer = wait_peer(laptop, [](const json& p) { return p["paths"].size() == 1; });
  EXPECT_EQ(peer["paths"].size(), 1u) << peer.dump();

  // The router forwards the port while the provider runs, and no longer
  // once it has stopped (it removes the mapping on its way out).
  std::string dport = "dport " + port + " ";
  EXPECT_NE(gateway.forwards().find(dport), std::string::npos) << gateway.forwards();
  EXPECT_EQ(studio.daemon().stop(), 0) << studio.daemon().log();
  EXPECT_EQ(gateway.forwards().find(dport), std::string::npos) << gateway.forwards() << "\n" << gateway.log();
}

// Hole punching (issue 7): a provider in b1 that listens on no port and a
// consumer in a1, both with hole punching on and two relays (at the public
// router's two addresses, so STUN can tell each node's NAT kind).
struct PunchLab {
  explicit PunchLab(NatLabOptions nats, const Env& extra = {})
      : lab(nats), relay(lab, dir), relay2(lab, dir, true),
        studio(dir, "studio", true, env(extra, true), "[link]\nlisten = \"\"\n", in_lab(lab, "b1")),
        laptop(dir, "laptop", false, env(extra, false), "", in_lab(lab, "a1")) {}
  Env env(const Env& extra, bool provider) const {
    Env e = {{"YONDER_LOG_LEVEL", "debug"},
             {"YONDER_LINK_HOLE_PUNCHING", "true"},
             {"YONDER_LINK_RELAYS", relay.pinned() + "," + relay2.pinned()}};
    if (provider) e["YONDER_LINK_LISTEN"] = "";
    for (const auto& [k, v] : extra) e[k] = v;
    return e;
  }
  // Pairs the laptop with the studio under `scope_args`.
  void pair(std::vector<std::string> scope_args) {
    scope_args.insert(scope_args.begin(), "share");
    auto share = studio.yonder_json(scope_args);
    pairing_at = std::chrono::steady_clock::now();
    auto r = laptop.yonder({"pair", share["link"].get<std::string>()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  double since_pairing() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - pairing_at).count();
  }
  std::chrono::steady_clock::time_point pairing_at;
  NatLab lab;
  TempDir dir;
  LabRelay relay, relay2;
  Node studio, laptop;
};

// GET over TCP from inside a lab node (bash's /dev/tcp): the forwarded port
// listens on that node's loopback.
std::string http_get_in(const NatLab& lab, std::string_view node, int port) {
  auto r = lab.run_in(node, {"bash", "-c",
                             "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                                 " && printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"});
  return r.out;
}

// Two homes behind port-preserving NATs; the provider listens on no port.
// Paired through a relay, the link punches a direct UDP path and moves onto
// QUIC over it; then every command runs over the QUIC carrier (run with
// upload and exit code, logs -f, exec -i and -it, cp both ways, forward), and
// killing both relays mid-job changes nothing: the log stream goes on, no
// lost contact, the path stays punched.
TEST_F(ReachLab, ConeNatsPunchADirectPathAndEveryCommandRunsOverQuic) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  auto& [pairing_at, lab, dir, relay, relay2, studio, laptop] = pl;
  pl.pair({"--scope", "run,exec,files,forward", "--max-jobs", "4"});
  if (HasFatalFailure()) return;

  auto peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "punched" && p.contains("rtt_ms"); });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump() << "\nLAPTOP\n"
                                                    << laptop.daemon().log() << "\nSTUDIO\n"
                                                    << studio.daemon().log();
  // The path is the provider's home NAT (the punched mapping), over QUIC.
  EXPECT_NE(peer.value("path", "").find("quic"), std::string::npos) << peer.dump();
  EXPECT_NE(peer.value("path", "").find(lab.address("nat-b") + ":"), std::string::npos) << peer.dump();
  EXPECT_TRUE(peer.contains("rtt_ms")) << peer.dump();
  std::cout << "[ punch    ] both online -> punched path: " << peer["punch"].value("elapsed_ms", 0.0)
            << " ms (punch only; attempts " << peer["punch"].value("attempts", 0) << ")\n";
  // Each side's netcheck: punchable, at its home's public address.
  for (auto [node, nat] : {std::make_pair(&laptop, "nat-a"), std::make_pair(&studio, "nat-b")}) {
    auto nc = node->yonder_json({"netcheck"});
    EXPECT_EQ(nc["udp"].value("nat", ""), "punchable") << nc.dump();
    EXPECT_EQ(nc["udp"].value("public", "").rfind(lab.address(nat) + ":", 0), 0u) << nc.dump();
    auto text = node->yonder({"netcheck"});
    EXPECT_NE(text.out.find("Punching    possible"), std::string::npos) << text.out;
  }

  // run: upload, output, exit code, over QUIC (the relays carry nothing:
  // their dumps stay as they were).
  size_t dumped = relay.dump().size() + relay2.dump().size();
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/payload.txt") << "over-quic-in-a-file\n";
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--", "sh", "-c",
                          "cat payload.txt; echo done > result.txt; exit 5"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  std::cout << "[ first job] preserving/preserving, two relays: punched, pair to first job's end "
            << pl.since_pairing() << " s\n";
  EXPECT_NE(r.out.find("over-quic-in-a-file\n"), std::string::npos) << r.out;
  EXPECT_EQ(relay.dump().size() + relay2.dump().size(), dumped) << "the job went through a relay";

  // A running job for exec, cp and forward.
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "mkdir -p /tmp/www && echo hello over quic > /tmp/www/index.html && echo out > out.txt && "
                          "exec httpd -f -p 8080 -h /tmp/www"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  json ps;
  EXPECT_TRUE(wait_until(
      [&ps, &consumer = laptop] {
        ps = consumer.yonder_json({"ps"});
        return ps.is_object() && !ps["jobs"].empty() && ps["jobs"][0]["state"] == "running";
      },
      120s, 100ms))
      << ps.dump();
  // exec's stream comes through a port of the consumer daemon's loopback, in a1.
  auto piped = lab.run_in("a1", {program_path("yonder"), "exec", "-i", id, "--", "sh", "-c", "read x; echo got $x; exit 3"},
                          laptop.env(), "quic\n");
  EXPECT_EQ(piped.exit_code, 3) << piped.err;
  EXPECT_EQ(piped.out, "got quic\n");
  // exec -it through a real local terminal (script(1)): raw mode, the
  // typed line reaches the remote shell, its exit code comes back.
  if (std::filesystem::exists("/usr/bin/script")) {
    std::string cmd = program_path("yonder") + " exec -it " + id + " -- sh -c 'read x; echo typed:$x; exit 6'";
    auto tty = lab.run_in("a1", {"/usr/bin/script", "-qec", cmd, "/dev/null"}, laptop.env(), "abc\n");
    EXPECT_EQ(tty.exit_code, 6) << tty.out << tty.err;
    EXPECT_NE(tty.out.find("typed:abc"), std::string::npos) << tty.out;
  }
  std::string local = dir / "in.txt";
  std::ofstream(local) << "sent in\n";
  auto cp_in = laptop.yonder({"cp", local, id + ":inbox"});
  EXPECT_EQ(cp_in.exit_code, 0) << cp_in.err;
  std::string back = dir / "back";
  std::filesystem::create_directories(back);
  auto cp = laptop.yonder({"cp", id + ":inbox/in.txt", back});
  EXPECT_EQ(cp.exit_code, 0) << cp.err;
  std::ifstream bin(back + "/inbox/in.txt");  // cp keeps the path under the workspace
  std::string line;
  std::getline(bin, line);
  EXPECT_EQ(line, "sent in");
  auto fwd = laptop.yonder_json({"forward", id, "0:8080"});
  ASSERT_TRUE(fwd.is_object()) << fwd.dump();
  std::string page = http_get_in(lab, "a1", fwd.value("local_port", 0));
  EXPECT_NE(page.find("hello over quic"), std::string::npos) << page;
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);

  // logs -f while both relays die: nothing notices.
  auto following = follow_ticking_job(laptop, 40);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;
  relay.kill();
  relay2.kill();
  EXPECT_EQ(follow.wait(60s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 40);
  EXPECT_EQ(follow.err().find("lost contact"), std::string::npos) << follow.err();
  auto after = wait_peer(laptop, [](const json& p) { return p["paths"].size() == 1; });
  EXPECT_EQ(after.value("path_kind", ""), "punched") << after.dump();
  EXPECT_EQ(after["paths"].size(), 1u) << "the relayed session should have drained: " << after.dump();
}

// A punched path that dies (home B's router starts dropping all UDP) while
// `logs -f` follows a job: the link notices (link.dead_after_s, 3 s here),
// falls back to the relay, and the log stream resumes from the provider's
// log: every line once, in order; `yonder peers` says why there is no direct
// path now (the new punch finds UDP blocked).
TEST_F(ReachLab, ADeadPunchedPathFallsBackToTheRelayAndLogsResume) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving}, {{"YONDER_LINK_DEAD_AFTER_S", "3"}});
  auto& [pairing_at, lab, dir, relay, relay2, studio, laptop] = pl;
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "punched"; });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump();

  auto following = follow_ticking_job(laptop, 100);
  ASSERT_TRUE(following);
  LiveProcess& follow = *following;
  ASSERT_EQ(lab.run_in("nat-b", {"iptables", "-I", "FORWARD", "-p", "udp", "-j", "DROP"}).exit_code, 0);
  EXPECT_EQ(follow.wait(90s), 0) << follow.output();
  expect_lines_once_in_order(follow.out(), "tick", 100);
  peer = wait_peer(laptop, [](const json& p) {
    return p.value("path_kind", "") == "relay" && p.contains("punch") && p["punch"].value("state", "") == "failed";
  });
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log();
  EXPECT_EQ(peer["punch"].value("state", ""), "failed") << peer.dump();
  EXPECT_FALSE(peer["punch"].value("reason", "").empty()) << peer.dump();
}

// The same death with the link's own dead-peer check out of reach
// (link.dead_after_s 600): a punched path that hears nothing for four
// keepalives (5 s each) is ended by QUIC's idle timeout, so the link is back
// on the relay within 45 s, where QUIC's own 60 s would have kept it on the
// dead path, and a job runs there.
TEST_F(ReachLab, ASilentPunchedPathEndsAfterFourKeepalivesAndTheLinkGoesBackToTheRelay) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving}, {{"YONDER_LINK_DEAD_AFTER_S", "600"}});
  NatLab& lab = pl.lab;
  Node& laptop = pl.laptop;  // a reference, not a structured binding: the wait's lambda captures it
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "punched"; });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump();

  ASSERT_EQ(lab.run_in("nat-b", {"iptables", "-I", "FORWARD", "-p", "udp", "-j", "DROP"}).exit_code, 0);
  const auto silent_at = std::chrono::steady_clock::now();
  json last;
  const bool back = wait_until(
      [&] {
        auto peers = laptop.yonder_json({"peers"});
        if (!peers.contains("peers") || peers["peers"].empty()) return false;
        last = peers["peers"][0];
        return last.value("path_kind", "") == "relay";
      },
      45s, 100ms);
  ASSERT_TRUE(back) << "still " << last.dump() << "\nLAPTOP\n" << laptop.daemon().log();
  std::cout << "[ silent   ] the punched path went silent -> back on the relay: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - silent_at).count() << " s\n";
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo relayed; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "relayed\n");
}

// The provider's home behind a symmetric NAT (a new random public port per
// destination), the consumer's port-preserving: the two punch by birthday
// probing (the provider's side opens 256 ports, the laptop probes random
// ports of its NAT), the link moves onto QUIC from the port found, and a job
// runs over it with the relays carrying nothing. Whichever side initiates
// (the keys decide), the symmetric side dials QUIC.
TEST_F(ReachLab, OneSymmetricNatIsCrossedByBirthdayProbingAndAJobRunsDirect) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  auto& [pairing_at, lab, dir, relay, relay2, studio, laptop] = pl;
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "punched"; });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log()
                                                    << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_NE(peer.value("path", "").find("quic"), std::string::npos) << peer.dump();
  EXPECT_NE(peer.value("path", "").find(lab.address("nat-b") + ":"), std::string::npos) << peer.dump();
  EXPECT_TRUE(peer["punch"].value("birthday", false)) << peer.dump();
  std::cout << "[ punch    ] symmetric/preserving: birthday punched in " << peer["punch"].value("elapsed_ms", 0.0)
            << " ms, " << peer["punch"].value("datagrams", 0) << " datagrams from the laptop\n";
  auto nc = studio.yonder_json({"netcheck"});
  EXPECT_EQ(nc["udp"].value("nat", ""), "symmetric") << nc.dump();
  EXPECT_NE(nc["udp"].value("punching", "").find("birthday probing"), std::string::npos) << nc.dump();

  size_t dumped = relay.dump().size() + relay2.dump().size();
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo direct; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(r.out, "direct\n");
  std::cout << "[ first job] preserving/symmetric, two relays: birthday-punched, pair to first job's end "
            << pl.since_pairing() << " s\n";
  EXPECT_EQ(relay.dump().size() + relay2.dump().size(), dumped) << "the job went through a relay";
}

// Both homes behind symmetric NATs: no punch is attempted (neither side's
// port can be guessed), the link stays on the relay, `yonder peers` says
// why, and jobs run over the relay as before.
TEST_F(ReachLab, BothNatsSymmetricStayOnTheRelayAndSayWhy) {
  PunchLab pl({.nat_a = NatMode::kSymmetric, .nat_b = NatMode::kSymmetric});
  auto& [pairing_at, lab, dir, relay, relay2, studio, laptop] = pl;
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) {
    return p.contains("punch") && p["punch"].value("state", "") == "failed";
  });
  ASSERT_TRUE(peer.contains("punch")) << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(peer["punch"].value("state", ""), "failed") << peer.dump();
  EXPECT_NE(peer["punch"].value("reason", "").find("both NATs are symmetric"), std::string::npos) << peer.dump();
  EXPECT_EQ(peer["punch"].value("datagrams", 0), 0) << peer.dump();
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();
  auto text = laptop.yonder({"peers"});
  EXPECT_NE(text.out.find("no direct path: "), std::string::npos) << text.out;
  auto nc = studio.yonder_json({"netcheck"});
  EXPECT_EQ(nc["udp"].value("nat", ""), "symmetric") << nc.dump();
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo relayed; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(r.out, "relayed\n");
}

// One relay: the UDP check cannot tell home B's symmetric NAT from a
// port-preserving one (that takes two servers), but the relay's two TCP
// registrations can. That is taken for UDP too: no punch is tried (it
// could only time out), netcheck says so instead of "tried anyway", and the
// laptop hears why; the link stays on the relay.
TEST_F(ReachLab, WithOneRelayASymmetricNatSeenOverTcpSkipsTheUdpPunchAndSaysWhy) {
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  TempDir dir;
  LabRelay relay(lab, dir);
  Env common = {{"YONDER_LOG_LEVEL", "debug"},
                {"YONDER_LINK_HOLE_PUNCHING", "true"},
                {"YONDER_LINK_RELAYS", relay.pinned()}};
  Env provider = common;
  provider["YONDER_LINK_LISTEN"] = "";
  Node studio(dir, "studio", true, provider, "[link]\nlisten = \"\"\n", in_lab(lab, "b1"));
  Node laptop(dir, "laptop", false, common, "", in_lab(lab, "a1"));
  json nc;
  ASSERT_TRUE(wait_until([&] {
    nc = studio.yonder_json({"netcheck"});
    return nc.value("nat", "") == "symmetric";
  }, 60s, 200ms)) << nc.dump();
  EXPECT_EQ(nc["udp"].value("nat", ""), "unknown") << nc.dump();
  EXPECT_NE(nc["udp"].value("punching", "").find("not tried: the NAT picked a new public port for each TCP connection"),
            std::string::npos)
      << nc.dump();
  auto text = studio.yonder({"netcheck"});
  EXPECT_EQ(text.out.find("tried anyway"), std::string::npos) << text.out;

  auto share = studio.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(laptop.yonder({"pair", share["link"].get<std::string>()}).exit_code, 0);
  auto peer = wait_peer(laptop, [](const json& p) {
    return p.contains("punch") && p["punch"].value("state", "") == "failed";
  });
  ASSERT_TRUE(peer.contains("punch")) << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log() << "\nSTUDIO\n"
                                      << studio.daemon().log();
  EXPECT_NE(peer["punch"].value("reason", "").find("symmetric"), std::string::npos) << peer.dump();
  EXPECT_EQ(peer.value("path_kind", ""), "relay") << peer.dump();
}

// UDP blocked in both homes: neither side learns a public UDP address
// (netcheck asks the relays again and says why), so no punch is tried (none
// could work), and the link and its jobs stay on the relay, over TCP.
TEST_F(ReachLab, WithUdpBlockedNoPunchIsTriedAndNetcheckSaysWhy) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  // Plain references: clang 14 cannot capture structured bindings in a lambda.
  NatLab& lab = pl.lab;
  Node& studio = pl.studio;
  Node& laptop = pl.laptop;
  for (const char* nat : {"nat-a", "nat-b"}) {
    ASSERT_EQ(lab.run_in(nat, {"iptables", "-I", "FORWARD", "-p", "udp", "-j", "DROP"}).exit_code, 0);
  }
  // The daemons checked their NAT when they started; netcheck checks again.
  for (Node* n : {&laptop, &studio}) {
    auto text = n->yonder({"netcheck"});
    EXPECT_NE(text.out.find("Punching    not tried: this node has no public UDP address"), std::string::npos)
        << text.out;
    EXPECT_EQ(text.out.find("tried anyway"), std::string::npos) << text.out;
  }
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  // Whichever side starts punches (the smaller key) gives up before sending anything.
  json punched;
  ASSERT_TRUE(wait_until(
      [&] {
        for (Node* n : {&laptop, &studio}) {
          for (const auto& p : n->yonder_json({"peers"}).value("peers", json::array())) {
            if (p.contains("punch") && p["punch"].value("state", "") == "failed") punched = p;
          }
        }
        return !punched.is_null();
      },
      120s, 100ms))
      << "LAPTOP\n" << laptop.daemon().log() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_NE(punched["punch"].value("reason", "").find("no public UDP address"), std::string::npos) << punched.dump();
  EXPECT_EQ(punched["punch"].value("attempts", -1), 0) << "no offer went out: " << punched.dump();
  EXPECT_EQ(punched.value("path_kind", ""), "relay") << punched.dump();
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo relayed; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "relayed\n");
}


// A UDP flow in a NAT's conntrack table: its two tuples (original and
// reply: which public port the NAT gave it), the seconds it has left, and
// whether the NAT has seen it two-way.
struct NatFlow {
  std::string tuples;  // "src=.. dst=.. sport=.. dport=.. src=.. dst=.. sport=.. dport=.."
  int left = -1;
  bool unreplied = false;
};

// The UDP flows through `nat` to or from `other` (the far home's public
// address: the punched path's mapping, not the relays' STUN flows), read
// from the NAT's conntrack table by a thread inside its namespace (no
// program is started per sample). Throws if the table cannot be read.
std::vector<NatFlow> punched_flows(const NatLab& lab, std::string_view nat, const std::string& other) {
  std::vector<NatFlow> flows;
  lab.in_node(nat, [&] {
    std::ifstream table("/proc/thread-self/net/nf_conntrack");
    if (!table) throw std::runtime_error("cannot read " + std::string(nat) + "'s conntrack table");
    for (std::string line; std::getline(table, line);) {
      if (line.find(" udp ") == std::string::npos || line.find("=" + other + " ") == std::string::npos) continue;
      std::istringstream fields(line);  // ipv4 2 udp 17 SECONDS_LEFT src=... [UNREPLIED] src=... mark=...
      std::string family, family_number, protocol, protocol_number;
      NatFlow flow;
      fields >> family >> family_number >> protocol >> protocol_number >> flow.left;
      for (std::string field; fields >> field;) {
        if (field == "[UNREPLIED]") flow.unreplied = true;
        if (field.starts_with("src=") || field.starts_with("dst=") || field.starts_with("sport=") ||
            field.starts_with("dport=")) {
          flow.tuples += (flow.tuples.empty() ? "" : " ") + field;
        }
      }
      flows.push_back(std::move(flow));
    }
  });
  return flows;
}

// Routers that forget an idle UDP mapping quickly (conntrack timeouts of
// 10 s, 15 s once a flow is a two-way stream, where Linux's defaults are
// 30 s and 120 s). Linux makes a flow a stream only with a packet more than
// 2 s after it began, and after the punch the next packet is the first
// keepalive: a keepalive of 10 s never gets there before the 10 s expire.
// The punched path's keepalive (link.punch_keepalive_s, 5 s) does, and then
// refreshes both homes' mappings well within 15 s, so while the link idles
// for 40 s each NAT keeps the one two-way mapping the punch made: never
// without it, never a second one, never another public port; and the path
// is still the punched one at the end. With keepalives at 10 s each mapping
// expires every cycle: when the other home's packet then reaches a NAT
// first, the NAT records it one-way ([UNREPLIED]) on the public port and
// gives this home's next packet another port, and the path is broken until
// both entries expire again.
TEST_F(ReachLab, APunchedPathKeepsItsNatMappingsWithShortConntrackTimeouts) {
  PunchLab pl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  NatLab& lab = pl.lab;
  Node& laptop = pl.laptop;
  for (const char* nat : {"nat-a", "nat-b"}) {
    ASSERT_EQ(lab.run_in(nat, {"sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=10",
                               "net.netfilter.nf_conntrack_udp_timeout_stream=15"})
                  .exit_code,
              0);
  }
  pl.pair({"--scope", "run"});
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("path_kind", "") == "punched"; });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log();
  const std::string path = peer.value("path", "");

  // Sampled every 250 ms for 40 s (eight keepalives); nothing else
  // goes over the link meanwhile. The first sample's two-way flow is the
  // mapping; a sample without it, or with any other flow, is a lapse, told
  // with when it happened and what the table held.
  struct Seen {
    std::string mapping;  // the first sample's flow
    int lapses = 0;
    std::string first_lapse;
    int least_left = 1'000;
  };
  const std::pair<std::string, std::string> homes[] = {{"nat-a", lab.address("nat-b")},
                                                       {"nat-b", lab.address("nat-a")}};  // NAT, the far home
  std::map<std::string, Seen> seen;  // NAT -> what the samples saw
  int samples = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + 40s;
  while (std::chrono::steady_clock::now() < until) {
    const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& [nat, other] : homes) {
      const auto flows = punched_flows(lab, nat, other);
      Seen& s = seen[nat];
      if (s.mapping.empty() && flows.size() == 1 && !flows[0].unreplied) s.mapping = flows[0].tuples;
      const bool kept = flows.size() == 1 && !flows[0].unreplied && flows[0].tuples == s.mapping;
      if (kept) {
        s.least_left = std::min(s.least_left, flows[0].left);
        continue;
      }
      if (s.lapses++ > 0) continue;
      std::ostringstream what;
      what << "first at " << at << " s, the mapping being " << (s.mapping.empty() ? "none" : s.mapping)
           << "; the table held " << flows.size() << " flow(s):";
      for (const NatFlow& f : flows) what << " [" << f.tuples << (f.unreplied ? ", one-way" : "") << "]";
      s.first_lapse = what.str();
    }
    ++samples;
    std::this_thread::sleep_for(250ms);  // sampling a table: there is no event to wait for
  }
  EXPECT_GT(samples, 40);
  for (const auto& [nat, other] : homes) {
    const Seen& s = seen[nat];
    EXPECT_EQ(s.lapses, 0) << "of " << samples << " samples, " << nat << "'s mapping had lapsed in " << s.lapses
                           << " (" << s.first_lapse << ")\nLAPTOP\n"
                           << laptop.daemon().log();
    std::cout << "[ nat      ] " << nat << ": the mapping never had less than " << s.least_left << " s left ("
              << samples << " samples)\n";
  }
  auto after = laptop.yonder_json({"peers"});
  ASSERT_FALSE(after.value("peers", json::array()).empty()) << after.dump();
  EXPECT_EQ(after["peers"][0].value("path_kind", ""), "punched") << after.dump();
  EXPECT_EQ(after["peers"][0].value("path", ""), path) << after.dump();
}

// Reachability measured by peers (dial-back): the provider behind home B's
// NAT listens on a port and advertises home B's public address with it.
// Asked by `netcheck`, the laptop (its only connected peer, through the
// relay or a punched path) dials that address back over TCP and over UDP
// (QUIC, from a fresh port, so the punched path's mapping does not let it
// in): with no port forwarded both verdicts are "unreachable", naming the
// laptop; once home B's router forwards the TCP port (DNAT) TCP is
// "reachable" at that address, confirmed by the laptop, and UDP is still
// not; once it forwards the UDP port too, UDP is reachable there. A peer's
// request to dial loopback or a private address is refused, saying which
// rule, with nothing dialled, over either transport.
TEST_F(ReachLab, PeersDialANodeBackAndNetcheckSaysWhetherItIsReachable) {
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  TempDir dir;
  LabRelay relay(lab, dir);
  const std::string port = "47850";  // in b1's own network namespace: nothing else there to collide with
  const std::string public_address = lab.address("nat-b") + ":" + port;
  Node studio(dir, "studio", true,
              {{"YONDER_LINK_LISTEN", "0.0.0.0:" + port},
               {"YONDER_LINK_ADVERTISE", public_address},
               {"YONDER_LINK_RELAYS", relay.pinned()},
               {"YONDER_LINK_HOLE_PUNCHING", "true"}},
              "", in_lab(lab, "b1"));
  Node laptop(dir, "laptop", false, {{"YONDER_LINK_RELAYS", relay.pinned()}, {"YONDER_LINK_HOLE_PUNCHING", "true"}}, "",
              in_lab(lab, "a1"));
  auto share = studio.yonder_json({"share", "--scope", "run"});
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  auto seen = wait_peer(studio, [](const json& p) { return p.value("connected", false); });
  ASSERT_TRUE(seen.value("connected", false)) << seen.dump();

  auto reachability = [&] {
    auto nc = studio.yonder_json({"netcheck"});
    EXPECT_TRUE(nc.contains("reachability")) << nc.dump();
    return nc.value("reachability", json::object());
  };
  auto before = reachability();
  EXPECT_EQ(before.value("state", ""), "unreachable") << before.dump() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(before.value("failed_by", json::array()), json::array({"laptop"})) << before.dump();
  EXPECT_EQ(before.value("tested", json::array()), json::array({public_address})) << before.dump();
  // The UDP socket takes the link's port number; the NAT keeps it, so STUN
  // saw the same address the provider advertises.
  json udp_before = before.value("udp", json::object());
  EXPECT_EQ(udp_before.value("state", ""), "unreachable") << before.dump() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(udp_before.value("failed_by", json::array()), json::array({"laptop"})) << before.dump();
  EXPECT_EQ(udp_before.value("tested", json::array()), json::array({public_address})) << before.dump();
  auto text = studio.yonder({"netcheck"});
  EXPECT_NE(text.out.find("Reachable   no: laptop could not reach this node at " + public_address), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("Over UDP    no: laptop could not reach this node over UDP at " + public_address),
            std::string::npos)
      << text.out;

  // Home B's router forwards the port to the provider.
  auto dnat = lab.run_in("nat-b", {"iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "-d", lab.address("nat-b"),
                                   "--dport", port, "-j", "DNAT", "--to-destination", lab.address("b1") + ":" + port});
  ASSERT_EQ(dnat.exit_code, 0) << dnat.err;
  auto allow = lab.run_in("nat-b", {"iptables", "-I", "FORWARD", "-i", "wan0", "-m", "conntrack", "--ctstate", "DNAT",
                                    "-j", "ACCEPT"});
  ASSERT_EQ(allow.exit_code, 0) << allow.err;
  auto after = reachability();
  EXPECT_EQ(after.value("state", ""), "reachable") << after.dump() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(after.value("address", ""), public_address) << after.dump();
  EXPECT_EQ(after.value("confirmed_by", json::array()), json::array({"laptop"})) << after.dump();
  EXPECT_EQ(after.value("udp", json::object()).value("state", ""), "unreachable") << after.dump();

  // And the UDP port: the punching socket answers the laptop's QUIC
  // handshake, which ends there (no session, no failed punch).
  auto dnat_udp = lab.run_in("nat-b", {"iptables", "-t", "nat", "-A", "PREROUTING", "-p", "udp", "-d",
                                       lab.address("nat-b"), "--dport", port, "-j", "DNAT", "--to-destination",
                                       lab.address("b1") + ":" + port});
  ASSERT_EQ(dnat_udp.exit_code, 0) << dnat_udp.err;
  auto with_udp = reachability();
  json udp_after = with_udp.value("udp", json::object());
  EXPECT_EQ(udp_after.value("state", ""), "reachable") << with_udp.dump() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(udp_after.value("address", ""), public_address) << with_udp.dump();
  EXPECT_EQ(udp_after.value("confirmed_by", json::array()), json::array({"laptop"})) << with_udp.dump();
  EXPECT_EQ(with_udp.value("state", ""), "reachable") << with_udp.dump();
  EXPECT_EQ(udp_after.value("why", ""), "reached over UDP at " + public_address + " by laptop") << with_udp.dump();
  auto still = studio.yonder_json({"peers"});
  ASSERT_FALSE(still.value("peers", json::array()).empty()) << still.dump();
  EXPECT_TRUE(still["peers"][0].value("connected", false)) << still.dump();

  // A hostile peer cannot point the provider's dials at its own host or LAN.
  auto call = laptop.yonder({"call", "studio", "reach.dial_back",
                             R"({"addresses": ["127.0.0.1:22", ")" + lab.address("nat-b.lan") +
                                 R"(:80"], "udp": ["127.0.0.1:53"]})"});
  ASSERT_EQ(call.exit_code, 0) << call.err;
  EXPECT_NE(call.out.find("a loopback address"), std::string::npos) << call.out;
  EXPECT_NE(call.out.find("a private or shared address"), std::string::npos) << call.out;
  EXPECT_NE(call.out.find("\"udp\""), std::string::npos) << call.out;
  EXPECT_EQ(call.out.find("\"reached\": true"), std::string::npos) << call.out;
}

// A third home: a friend's node at a public address (the public router's
// second address), nobody's configured relay; no link.relays anywhere. The
// provider behind home B's NAT pairs with the friend, which asks it to dial
// back, finds itself reachable and offers its relay (relay.offer, on by
// default); the provider registers there and its share link names it, so
// the laptop behind home A's NAT pairs through the friend's box (as a
// visitor: the laptop is not the friend's peer).
struct FriendLab {
  explicit FriendLab(NatLabOptions nats)
      : lab(nats),
        friend_node(dir, "friend", false,
                    {{"YONDER_LINK_LISTEN", "0.0.0.0:47850"},
                     {"YONDER_LINK_ADVERTISE", lab.server2_address() + ":47850"},
                     // As by default: its peers dial it back over UDP too. Its
                     // address is the public side's second one, so its socket
                     // is bound there: one on 0.0.0.0 would answer from the
                     // first address, which the peers' NATs drop.
                     {"YONDER_LINK_HOLE_PUNCHING", "true"},
                     {"YONDER_LINK_UDP_LISTEN", lab.server2_address() + ":47850"},
                     {"YONDER_RELAY_PEER_RATE_MB", "2"}},
                    "", in_lab(lab, "pub")),
        studio(dir, "studio", true, {{"YONDER_LINK_LISTEN", ""}, {"YONDER_LINK_HOLE_PUNCHING", "true"}},
               "[link]\nlisten = \"\"\n", in_lab(lab, "b1")),
        laptop(dir, "laptop", false, {{"YONDER_LINK_HOLE_PUNCHING", "true"}}, "", in_lab(lab, "a1")),
        offered(lab.server2_address() + ":47851") {}  // the friend's link port + 1

  // The studio pairs with its friend and, once the friend offers its relay,
  // registers there; returns the studio's netcheck entry for that relay.
  json studio_registers_at_the_friends_relay() {
    studio.pair_with(friend_node, {"--scope", "run"});
    json used;
    wait_until(
        [&] {
          const json nc = studio.yonder_json({"netcheck"});
          for (const auto& r : nc.value("relays", json::array())) {
            if (r.value("address", "") == offered && r.value("state", "") == "registered") used = r;
          }
          return !used.is_null();
        },
        120s, 500ms);
    EXPECT_FALSE(used.is_null()) << studio.yonder({"netcheck"}).out << "\nFRIEND\n" << friend_node.daemon().log();
    return used;
  }
  // The studio's share link names the friend's relay and nothing else; the
  // laptop pairs with it.
  void laptop_pairs_through_it() {
    auto share = studio.yonder_json({"share", "--scope", "run"});
    EXPECT_TRUE(share["addresses"].empty()) << share.dump();
    ASSERT_EQ(share["relays"], json::array({offered})) << share.dump();
    pairing_at = std::chrono::steady_clock::now();
    auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
    ASSERT_EQ(pair.exit_code, 0) << pair.err << "\nFRIEND\n" << friend_node.daemon().log();
  }
  // A job on the studio from the laptop: its output and exit code come back.
  void run_a_job() {
    std::string marker = random_marker();
    auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                            "echo " + marker + "; exit 3"});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.out.find(marker + "\n"), std::string::npos) << r.out;
    auto peers = laptop.yonder_json({"peers"});
    std::cout << "[ first job] " << lab.info().at("nat_a") << "/" << lab.info().at("nat_b")
              << ", no relay configured, a friend's relay: "
              << (peers.value("peers", json::array()).empty() ? "" : peers["peers"][0].value("path_kind", ""))
              << ", pair to first job's end "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - pairing_at).count() << " s\n";
  }

  NatLab lab;
  TempDir dir;
  Node friend_node, studio, laptop;
  std::string offered;
  std::chrono::steady_clock::time_point pairing_at;
};

// The opt-in DHT (discovery.dht) with no relay anywhere: a friend's yonderd
// on the public side serves as the DHT's bootstrap node; the provider
// listens at a public address (198.18.0.5) and the laptop in home A pairs
// with it there. The provider then moves (its public address becomes
// 198.18.0.6; it comes back with the same identity and peers): the laptop's
// known address fails, it looks the provider up in the DHT, finds the
// record sealed for it, redials the new address and runs a job. Every UDP
// datagram on the public side is captured meanwhile: neither the provider's
// addresses as its record carries them nor its node id appear in them.
TEST_F(ReachLab, AProviderWhoseAddressChangedIsFoundThroughTheDhtAlone) {
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  TempDir dir;
  ASSERT_EQ(lab.run_in("pub", {"ip", "addr", "add", "198.18.0.5/32", "dev", "lo"}).exit_code, 0);
  std::string pcap = dir / "dht.pcap";
  auto capture = lab.spawn_in("pub", {"tcpdump", "-U", "-n", "-i", "any", "-w", pcap, "udp"});
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(pcap); }, 20s)) << "tcpdump did not start";
  const std::string bootstrap = lab.server2_address() + ":4222";
  Node dht_node(dir, "friend", false,
                {{"YONDER_DISCOVERY_DHT_LISTEN", bootstrap}, {"YONDER_RELAY_OFFER", "off"}}, "", in_lab(lab, "pub"));
  Node studio(dir, "studio", true,
              {{"YONDER_LINK_LISTEN", "198.18.0.5:7850"}, {"YONDER_DISCOVERY_DHT", bootstrap},
               {"YONDER_RELAY_OFFER", "off"}},
              "", in_lab(lab, "pub"));
  Node laptop(dir, "laptop", false, {{"YONDER_DISCOVERY_DHT", bootstrap}}, "", in_lab(lab, "a1"));
  auto share = studio.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(share["addresses"], json::array({"198.18.0.5:7850"})) << share.dump();
  ASSERT_TRUE(share["relays"].empty()) << share.dump();
  ASSERT_EQ(laptop.yonder({"pair", share["link"].get<std::string>()}).exit_code, 0);
  json nc;
  ASSERT_TRUE(wait_until([&] {
    nc = studio.yonder_json({"netcheck"});
    return nc["dht"].value("published_for", 0) >= 1;
  }, 60s, 200ms)) << nc.dump();
  auto text = studio.yonder({"netcheck"});
  EXPECT_NE(text.out.find("DHT         on UDP"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("published for 1 paired peer"), std::string::npos) << text.out;

  // The provider moves: down, its old address gone, back at the new one.
  studio.restart_with({{"YONDER_LINK_LISTEN", "198.18.0.6:7850"}}, [&] {
    ASSERT_EQ(lab.run_in("pub", {"ip", "addr", "del", "198.18.0.5/32", "dev", "lo"}).exit_code, 0);
    ASSERT_EQ(lab.run_in("pub", {"ip", "addr", "add", "198.18.0.6/32", "dev", "lo"}).exit_code, 0);
  });
  const auto moved_at = std::chrono::steady_clock::now();
  auto peer = wait_peer(laptop, [](const json& p) {
    return p.value("connected", false) && p.value("path", "").find("198.18.0.6:7850") != std::string::npos;
  });
  ASSERT_NE(peer.value("path", "").find("198.18.0.6:7850"), std::string::npos)
      << peer.dump() << "\nLAPTOP\n" << laptop.daemon().log() << "\nSTUDIO\n" << studio.daemon().log();
  std::cout << "[ dht      ] the provider moved -> the laptop found it through the DHT and reconnected in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - moved_at).count() << " s\n";
  EXPECT_EQ(peer["dht"].value("result", ""), "found") << peer.dump();
  EXPECT_EQ(peer["dht"].value("addresses", json::array()), json::array({"198.18.0.6:7850"})) << peer.dump();
  // The new address is kept (a restart of the laptop dials it at once).
  EXPECT_EQ(peer.value("addresses", json::array()), json::array({"198.18.0.6:7850"})) << peer.dump();
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo found; exit 6"});
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_EQ(r.out, "found\n");

  // Nothing in the clear: the capture holds DHT traffic, and none of it
  // names the provider (what its record carries, its id, its key).
  ::kill(capture->pid(), SIGINT);
  capture->wait();
  std::ifstream in(pcap, std::ios::binary);
  std::string captured((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto dht_packets = run({"/usr/bin/env", "tcpdump", "-r", pcap, "-n", "udp port 4222"});
  size_t lines = static_cast<size_t>(std::count(dht_packets.out.begin(), dht_packets.out.end(), '\n'));
  EXPECT_GE(lines, 10u) << "the capture saw no DHT traffic: " << dht_packets.out << dht_packets.err;
  std::cout << "[ dht      ] " << lines << " datagrams to or from the bootstrap node captured, " << captured.size()
            << " bytes in all\n";
  for (const std::string& secret : {std::string("198.18.0.6:7850"), std::string("198.18.0.5:7850"), studio.node_id()}) {
    EXPECT_EQ(captured.find(secret), std::string::npos) << "in the clear on the wire: " << secret;
  }
}

// Home B's NAT is symmetric, so no punch is tried and the link stays on the
// friend's relay, whose limits hold: a bulk transfer is held to its
// relay.peer_rate_mb.
TEST_F(ReachLab, WithNoRelayConfiguredTwoHomesMeetAtAReachableFriendsRelay) {
  FriendLab fl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  auto& [lab, dir, friend_node, studio, laptop, offered, pairing_at] = fl;
  auto before = friend_node.yonder({"netcheck"});
  EXPECT_NE(before.out.find("Offering    no relay"), std::string::npos) << before.out;

  json used = fl.studio_registers_at_the_friends_relay();
  ASSERT_FALSE(used.is_null());
  EXPECT_EQ(used.value("offered_by", ""), "friend") << used.dump();
  auto friend_nc = friend_node.yonder_json({"netcheck"});
  EXPECT_EQ(friend_nc["reachability"].value("state", ""), "reachable") << friend_nc.dump();
  EXPECT_EQ(friend_nc["reachability"].value("confirmed_by", json::array()), json::array({"studio"}));
  // Over UDP too: the studio's QUIC handshake from behind its symmetric NAT
  // reached the friend's punching socket at its public address.
  json friend_udp = friend_nc["reachability"].value("udp", json::object());
  EXPECT_EQ(friend_udp.value("state", ""), "reachable") << friend_nc.dump() << "\nSTUDIO\n" << studio.daemon().log();
  EXPECT_EQ(friend_udp.value("address", ""), lab.server2_address() + ":47850") << friend_nc.dump();
  EXPECT_EQ(friend_nc["relay_server"].value("offered", ""), offered) << friend_nc.dump();
  auto friend_text = friend_node.yonder({"netcheck"});
  EXPECT_NE(friend_text.out.find("Offering    a relay at " + offered + " to paired peers"), std::string::npos)
      << friend_text.out;
  auto studio_text = studio.yonder({"netcheck"});
  EXPECT_NE(studio_text.out.find(offered + "  registered"), std::string::npos) << studio_text.out;
  EXPECT_NE(studio_text.out.find("[offered by peer friend]"), std::string::npos) << studio_text.out;

  fl.laptop_pairs_through_it();
  if (HasFatalFailure()) return;
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(peer.value("path", ""), "relay via " + offered) << peer.dump();
  fl.run_a_job();

  // The friend's limits hold: 12 MiB at 2 MB/s a peer, after a 4 MiB burst.
  constexpr double kBytes = 12.0 * 1024 * 1024;
  constexpr double kBurst = 4.0 * 1024 * 1024;
  auto speed = laptop.yonder_json({"speedtest", "studio", "--bytes", "12M"});
  ASSERT_TRUE(speed.contains("seconds")) << speed.dump();
  EXPECT_GE(speed.value("seconds", 0.0), 0.85 * (kBytes - kBurst) / 2e6) << speed.dump();
  auto carried = friend_node.yonder_json({"netcheck"})["relay_server"];
  EXPECT_GE(carried.value("bytes_relayed", 0.0), kBytes) << carried.dump();
  EXPECT_GT(carried.value("throttled", 0), 0) << carried.dump();
}

// Reachability lost: the friend's host stops taking new connections on its
// link port (a firewall rule, as when a router's forward goes away). Its
// next dial-back round finds it unreachable, so it withdraws its offer and
// closes the relay the offer opened (the port answers nothing after), and
// the studio stops using it.
TEST_F(ReachLab, AFriendThatPeersCanNoLongerReachClosesTheRelayItOffered) {
  FriendLab fl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  // The lambdas below name fl's members: clang cannot capture a structured binding.
  auto& [lab, dir, friend_node, studio, laptop, offered, pairing_at] = fl;
  ASSERT_FALSE(fl.studio_registers_at_the_friends_relay().is_null());
  const std::string relay_port = offered.substr(offered.rfind(':') + 1);
  auto relay_answers = [&] {
    return fl.lab
               .run_in("nat-b", {"bash", "-c",
                                 "exec 3<>/dev/tcp/" + fl.lab.server2_address() + "/" + relay_port + " && echo open"})
               .out == "open\n";
  };
  ASSERT_TRUE(relay_answers());

  auto drop = lab.run_in("pub", {"iptables", "-I", "INPUT", "-p", "tcp", "-d", lab.server2_address(), "--dport", "47850",
                                 "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"});
  ASSERT_EQ(drop.exit_code, 0) << drop.err;
  auto nc = friend_node.yonder_json({"netcheck"});
  EXPECT_EQ(nc["reachability"].value("state", ""), "unreachable") << nc.dump();
  EXPECT_EQ(nc["relay_server"].value("state", ""), "off") << nc.dump() << "\nFRIEND\n" << friend_node.daemon().log();
  EXPECT_EQ(nc["relay_server"].value("offered", "?"), "") << nc.dump();
  EXPECT_NE(nc["relay_server"].value("offer_why", "").find("could not reach this node"), std::string::npos)
      << nc.dump();
  EXPECT_FALSE(relay_answers());
  bool dropped = wait_until(
      [&] {
        for (const auto& r : fl.studio.yonder_json({"netcheck"}).value("relays", json::array())) {
          if (r.value("address", "") == fl.offered) return false;
        }
        return true;
      },
      60s, 250ms);
  EXPECT_TRUE(dropped) << studio.yonder({"netcheck"}).out;
}

// Both NATs port-preserving: the laptop and the studio meet at the friend's
// relay, then punch a direct path (the signals and the STUN check go
// through the friend's relay too), and a job runs over it.
TEST_F(ReachLab, PeersThatMetAtAFriendsRelayPunchADirectPathWhereTheNatsAllow) {
  FriendLab fl({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  ASSERT_FALSE(fl.studio_registers_at_the_friends_relay().is_null());
  fl.laptop_pairs_through_it();
  if (HasFatalFailure()) return;
  auto peer = wait_peer(fl.laptop, [](const json& p) { return p.value("path_kind", "") == "punched"; });
  ASSERT_EQ(peer.value("path_kind", ""), "punched") << peer.dump() << "\nLAPTOP\n"
                                                    << fl.laptop.yonder({"netcheck"}).out << "\nSTUDIO\n"
                                                    << fl.studio.yonder({"netcheck"}).out;
  EXPECT_NE(peer.value("path", "").find(fl.lab.address("nat-b") + ":"), std::string::npos) << peer.dump();
  fl.run_a_job();
}

// The issue's own case: a provider whose only reachable peer is one
// friend's home box with a mapped port. The friend (b1, behind home B's
// router, which runs a UPnP-IGD/NAT-PMP gateway) maps its link port; the
// provider (a1, behind home A's NAT, listening nowhere) pairs with it
// through that mapping; the friend, reached there, has the router map its
// relay's port too and offers the relay at that mapping; the provider
// registers there, and a consumer elsewhere (on the public side of the lab)
// pairs through it and runs a job. No link.relays anywhere.
TEST_F(ReachLab, AFriendsHomeBoxWithAMappedPortRelaysForTheProvidersConsumers) {
  if (auto why = LabGateway::unavailable_reason()) FAIL() << *why;
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kPreserving});
  TempDir dir;
  LabGateway gateway(lab, "nat-b");
  Node friend_node(dir, "friend", false,
                   {{"YONDER_LINK_LISTEN", "0.0.0.0:47850"}, {"YONDER_LINK_PORT_MAPPING", "true"}}, "",
                   in_lab(lab, "b1"));
  Node studio(dir, "studio", true, {{"YONDER_LINK_LISTEN", ""}}, "[link]\nlisten = \"\"\n", in_lab(lab, "a1"));
  Node laptop(dir, "laptop", false, {}, "", in_lab(lab, "pub"));
  // The friend's link port is mapped before it shares (the link names the mapping).
  json nc;
  EXPECT_TRUE(wait_until(
      [&] {
        nc = friend_node.yonder_json({"netcheck"});
        return nc.value("port_mapping", json::object()).value("state", "") == "mapped";
      },
      120s, 200ms))
      << nc.dump() << "\ngateway:\n" << gateway.log();
  const std::string link_mapped = nc["port_mapping"].value("external", "");
  ASSERT_EQ(link_mapped.rfind(lab.address("nat-b") + ":", 0), 0u) << nc.dump();

  studio.pair_with(friend_node, {"--scope", "run"});
  json used;
  bool registered = wait_until(
      [&] {
        const json snc = studio.yonder_json({"netcheck"});
        for (const auto& r : snc.value("relays", json::array())) {
          if (r.value("offered_by", "") == "friend" && r.value("state", "") == "registered") used = r;
        }
        return !used.is_null();
      },
      120s, 500ms);
  ASSERT_TRUE(registered) << studio.yonder({"netcheck"}).out << "\nFRIEND\n"
                          << friend_node.yonder({"netcheck"}).out << friend_node.daemon().log() << "\ngateway:\n"
                          << gateway.log();
  const std::string offered = used.value("address", "");
  auto friend_nc = friend_node.yonder_json({"netcheck"});
  EXPECT_EQ(friend_nc["reachability"].value("address", ""), link_mapped) << friend_nc.dump();
  EXPECT_EQ(friend_nc["relay_server"].value("offered", ""), offered) << friend_nc.dump();
  // The relay is offered at the router's mapping of its own port.
  EXPECT_EQ(offered.rfind(lab.address("nat-b") + ":", 0), 0u) << offered;
  EXPECT_NE(offered, link_mapped);
  EXPECT_NE(gateway.forwards().find("dport " + offered.substr(offered.rfind(':') + 1) + " "), std::string::npos)
      << gateway.forwards();

  auto share = studio.yonder_json({"share", "--scope", "run"});
  ASSERT_EQ(share["relays"], json::array({offered})) << share.dump();
  const auto pairing_at = std::chrono::steady_clock::now();
  auto pair = laptop.yonder({"pair", share["link"].get<std::string>()});
  ASSERT_EQ(pair.exit_code, 0) << pair.err << "\nFRIEND\n" << friend_node.daemon().log();
  std::string marker = random_marker();
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                          "echo " + marker + "; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  std::cout << "[ first job] preserving/preserving, no relay configured, a friend's relay behind a mapped port: "
            << "relay, pair to first job's end "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - pairing_at).count() << " s\n";
  auto peer = wait_peer(laptop, [](const json& p) { return p.value("connected", false); });
  EXPECT_EQ(peer.value("path", ""), "relay via " + offered) << peer.dump();
  EXPECT_NE(r.out.find(marker + "\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace yonder::testing
