// LAN discovery in the NAT lab: a1 and a2, on home A's LAN, find each
// other; b1, paired with both but in the other home, hears nothing of them
// and they nothing of it (multicast with TTL 1 stays on its LAN). Each node
// is a LanDiscovery whose socket was made inside its node's namespace; one
// io_context in the test drives all three.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>

#include "crypto/identity.h"
#include "discovery/lan_discovery.h"
#include "discovery/pair_key.h"
#include "support/nat_lab.h"

namespace yonder::testing {
namespace {

using discovery::LanCandidate;
using discovery::LanDiscovery;
using discovery::PairedPeer;

struct Node {
  Node(std::string n, uint16_t port) : name(std::move(n)), identity(Identity::generate().value()), link_port(port) {}
  PairedPeer pair_with(const Node& other) const {
    return {other.identity.node_id(), discovery::derive_pair_key(identity, other.identity.public_key()).value()};
  }
  bool saw(const Node& other) const {
    for (const auto& c : seen) {
      if (c.peer == other.identity.node_id()) return true;
    }
    return false;
  }
  std::string name;
  Identity identity;
  uint16_t link_port;
  std::vector<LanCandidate> seen;
  std::unique_ptr<LanDiscovery> discovery;
};

TEST(LanDiscoveryLab, NodesOnOneLanFindEachOtherAndTheOtherHomeSeesNothing) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  boost::asio::io_context io;
  Node a1("a1", 7101), a2("a2", 7102), b1("b1", 7201);
  std::function<void()> check;

  // A plain socket in b1 on the discovery group: anything from home A that
  // reached b1's LAN would land here (b1's own datagrams loop back; those
  // are told apart by their source).
  int sniffer = lab.socket_in("b1", AF_INET, SOCK_DGRAM);
  int one = 1;
  ASSERT_EQ(::setsockopt(sniffer, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(discovery::kDefaultPort);
  ASSERT_EQ(::bind(sniffer, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  ip_mreqn join{};
  ::inet_pton(AF_INET, discovery::kMulticastGroup, &join.imr_multiaddr);
  join.imr_ifindex = 0;
  ASSERT_EQ(::setsockopt(sniffer, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join), 0);

  auto start = [&](Node& n, std::vector<PairedPeer> peers) {
    lab.in_node(n.name, [&] {
      auto d = LanDiscovery::start(io, n.identity.public_key(), std::move(peers), {.link_port = n.link_port},
                                   [&](const LanCandidate& c) {
                                     n.seen.push_back(c);
                                     check();
                                   });
      ASSERT_TRUE(d.ok()) << d.error().to_string();
      // Chosen by itself: the node's one LAN interface, not loopback.
      EXPECT_EQ((*d)->interfaces(), std::vector<std::string>{"eth0"});
      n.discovery = std::move(*d);
    });
  };
  check = [&] {
    if (a1.saw(a2) && a2.saw(a1)) io.stop();
  };
  // b1 first: it is listening before home A says anything.
  start(b1, {b1.pair_with(a1), b1.pair_with(a2)});
  start(a1, {a1.pair_with(a2), a1.pair_with(b1)});
  start(a2, {a2.pair_with(a1), a2.pair_with(b1)});
  boost::asio::steady_timer limit(io, std::chrono::seconds(10));
  limit.async_wait([&](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  io.run();
  ASSERT_TRUE(a1.saw(a2)) << lab.status();
  ASSERT_TRUE(a2.saw(a1)) << lab.status();
  // Whatever else is on its way arrives within this (a LAN of veths).
  check = [] {};
  io.restart();
  io.run_for(std::chrono::milliseconds(300));

  for (const auto& c : a1.seen) {
    EXPECT_EQ(c.peer, a2.identity.node_id());
    EXPECT_EQ(c.address, lab.address("a2"));
    EXPECT_EQ(c.port, a2.link_port);
  }
  for (const auto& c : a2.seen) {
    EXPECT_EQ(c.peer, a1.identity.node_id());
    EXPECT_EQ(c.address, lab.address("a1"));
    EXPECT_EQ(c.port, a1.link_port);
  }
  EXPECT_TRUE(b1.seen.empty()) << "b1 discovered " << b1.seen[0].address;
  int from_b1 = 0, from_elsewhere = 0;
  char buf[2048];
  sockaddr_in from{};
  socklen_t len = sizeof from;
  while (::recvfrom(sniffer, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len) > 0) {
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof text);
    (text == lab.address("b1") ? from_b1 : from_elsewhere)++;
    len = sizeof from;
  }
  EXPECT_GE(from_b1, 1) << "the sniffer in b1 heard not even b1 itself";
  EXPECT_EQ(from_elsewhere, 0) << "datagrams from home A reached home B's LAN";
  ::close(sniffer);
  // Sockets go before the lab that holds their namespaces.
  a1.discovery.reset();
  a2.discovery.reset();
  b1.discovery.reset();
}

}  // namespace
}  // namespace yonder::testing
