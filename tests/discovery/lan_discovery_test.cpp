// LanDiscovery on real multicast sockets, over the loopback interface of a
// network namespace of this test's own (so the host's interfaces, and other
// tests listening on the discovery port, play no part). Needs root for the
// namespace; skips otherwise.
#include "discovery/lan_discovery.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <map>

#include "crypto/identity.h"
#include "discovery/pair_key.h"
#include "support/nat_lab.h"
#include "support/netns_env.h"
#include "support/subprocess.h"

namespace yonder::discovery {
namespace {

using testing::ip_program;
using testing::run;

// Moves this whole process into a fresh network namespace (once; threads
// started later inherit it), with loopback up and able to multicast.
std::optional<std::string> enter_private_netns() {
  static std::optional<std::string> failure = []() -> std::optional<std::string> {
    if (::geteuid() != 0) return "needs root to make a network namespace for multicast on loopback";
    if (::unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    for (auto args : {std::vector<std::string>{"link", "set", "lo", "up", "multicast", "on"},
                      std::vector<std::string>{"route", "add", "224.0.0.0/4", "dev", "lo"}}) {
      args.insert(args.begin(), ip_program());
      auto r = run(args);
      if (r.exit_code != 0) return "ip " + args[1] + ": " + r.err;
    }
    return std::nullopt;
  }();
  return failure;
}

struct Node {
  explicit Node(uint16_t port) : identity(Identity::generate().value()), link_port(port) {}
  NodeId id() const { return identity.node_id(); }
  PairedPeer pair_with(const Node& other) const {
    return {other.id(), derive_pair_key(identity, other.identity.public_key()).value()};
  }
  Identity identity;
  uint16_t link_port;
  std::vector<LanCandidate> seen;
  std::unique_ptr<LanDiscovery> discovery;
};

class LanDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_NETNS_OR_SKIP(enter_private_netns());
  }
  void start(Node& n, std::vector<PairedPeer> peers) {
    LanDiscoveryOptions options{.link_port = n.link_port, .interfaces = {"lo"}};
    auto d =
        LanDiscovery::start(io_, n.identity.public_key(), std::move(peers), options, [this, &n](const LanCandidate& c) {
          n.seen.push_back(c);
          if (done_ && done_()) io_.stop();
        });
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ((*d)->interfaces(), std::vector<std::string>{"lo"});
    n.discovery = std::move(*d);
  }
  // Runs the loop until `done` holds (checked on each candidate) or 10 s pass.
  void run_until(std::function<bool()> done) {
    done_ = std::move(done);
    boost::asio::steady_timer limit(io_, std::chrono::seconds(10));
    limit.async_wait([this](boost::system::error_code ec) {
      if (!ec) io_.stop();
    });
    io_.restart();
    io_.run();
  }
  // Lets the loop handle whatever is already on its way (datagrams on
  // loopback arrive within microseconds): a bound for "nothing else comes".
  void drain() {
    done_ = nullptr;
    io_.restart();
    io_.run_for(std::chrono::milliseconds(300));
  }

  boost::asio::io_context io_;
  std::function<bool()> done_;
};

bool saw(const Node& n, const Node& peer) {
  for (const auto& c : n.seen) {
    if (c.peer == peer.id()) return true;
  }
  return false;
}

TEST_F(LanDiscoveryTest, PairedNodesFindEachOtherAndAStrangerLearnsNothing) {
  Node a(7001), b(7002), stranger(7003);
  // The stranger knows a's and b's ids, but neither paired with it.
  start(stranger, {stranger.pair_with(a), stranger.pair_with(b)});
  start(a, {a.pair_with(b)});
  start(b, {b.pair_with(a)});
  run_until([&] { return saw(a, b) && saw(b, a); });
  ASSERT_TRUE(saw(a, b));
  ASSERT_TRUE(saw(b, a));
  drain();
  for (const auto& c : a.seen) {
    EXPECT_EQ(c.peer, b.id());
    EXPECT_EQ(c.address, "127.0.0.1");
    EXPECT_EQ(c.port, 7002);
  }
  for (const auto& c : b.seen) {
    EXPECT_EQ(c.peer, a.id());
    EXPECT_EQ(c.port, 7001);
  }
  EXPECT_TRUE(stranger.seen.empty()) << "the stranger recognised " << stranger.seen[0].peer.to_string();
}

TEST_F(LanDiscoveryTest, ANodeThatGainsItsFirstPeerStartsAnnouncing) {
  Node a(7001), b(7002);
  start(a, {});
  start(b, {b.pair_with(a)});
  drain();
  EXPECT_TRUE(b.seen.empty());  // a announced nothing
  a.discovery->set_peers({a.pair_with(b)});
  run_until([&] { return saw(a, b) && saw(b, a); });
  EXPECT_TRUE(saw(a, b));
  EXPECT_TRUE(saw(b, a));
}

TEST_F(LanDiscoveryTest, RefusesBadOptionsWithAReason) {
  Node a(7001);
  auto bad = [&](LanDiscoveryOptions o) {
    auto r = LanDiscovery::start(io_, a.identity.public_key(), {}, o, nullptr);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message();
  };
  EXPECT_NE(bad({.link_port = 0, .interfaces = {"lo"}}).find("link's port"), std::string::npos);
  EXPECT_NE(bad({.link_port = 1, .group = "10.0.0.1", .interfaces = {"lo"}}).find("multicast"), std::string::npos);
  EXPECT_NE(bad({.link_port = 1, .interfaces = {"nosuch0"}}).find("nosuch0"), std::string::npos);
  // This namespace has nothing but loopback: nothing to announce on by default.
  LanDiscoveryOptions every_interface;
  every_interface.link_port = 1;
  EXPECT_NE(bad(every_interface).find("no network interface"), std::string::npos);
}

}  // namespace
}  // namespace yonder::discovery
