// The LAN discovery protocol on a manual clock: schedule, recognition of
// paired peers only, answers to queries, bounds.
#include "discovery/lan_discovery_core.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "crypto/identity.h"
#include "discovery/pair_key.h"

namespace yonder::discovery {
namespace {

using std::chrono::milliseconds;

LanDiscoveryCore::RandomFill seeded(uint32_t seed) {
  auto rng = std::make_shared<std::mt19937>(seed);
  return [rng](std::span<uint8_t> out) {
    for (auto& b : out) b = static_cast<uint8_t>((*rng)());
  };
}

struct Node {
  explicit Node(uint16_t port) : identity(std::move(Identity::generate().value())), link_port(port) {}
  NodeId id() const { return identity.node_id(); }
  PairedPeer pair_with(const Node& other) const {
    return {other.id(), derive_pair_key(identity, other.identity.public_key()).value()};
  }
  LanDiscoveryCore core(std::vector<PairedPeer> peers, uint32_t seed = 1) const {
    LanDiscoveryCore c(identity.public_key(), {.link_port = link_port}, seeded(seed));
    c.set_peers(std::move(peers));
    return c;
  }
  Identity identity;
  uint16_t link_port;
};

const SteadyTime t0 = SteadyTime() + std::chrono::hours(1);

TEST(LanDiscoveryCore, QueriesTwiceAtStartThenAnnouncesEveryIntervalWithJitter) {
  Node a(7001), b(7002);
  auto core = a.core({a.pair_with(b)});
  EXPECT_EQ(core.next_deadline(), SteadyTime::max());  // not started
  core.start(t0);
  EXPECT_EQ(core.next_deadline(), t0);
  core.on_timer(t0);
  auto out = core.take_outgoing();
  ASSERT_EQ(out.size(), 1u);
  auto first = decode_announcement(out[0]);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->query());
  EXPECT_EQ(first->link_port, 7001);
  EXPECT_EQ(first->tags.size(), 8u);  // one real tag, padded to 8
  EXPECT_EQ(core.next_deadline(), t0 + milliseconds(1000));
  core.on_timer(t0 + milliseconds(999));
  EXPECT_TRUE(core.take_outgoing().empty());
  core.on_timer(t0 + milliseconds(1000));
  out = core.take_outgoing();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(decode_announcement(out[0])->query());
  EXPECT_NE(decode_announcement(out[0])->nonce, first->nonce);
  SteadyTime next = core.next_deadline();
  EXPECT_GE(next, t0 + milliseconds(1000 + 30000));
  EXPECT_LE(next, t0 + milliseconds(1000 + 33000));
  core.on_timer(next);
  out = core.take_outgoing();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(decode_announcement(out[0])->query());
}

TEST(LanDiscoveryCore, SilentWithoutPeers) {
  Node a(7001), b(7002);
  auto core = a.core({});
  core.start(t0);
  core.on_timer(t0);
  EXPECT_TRUE(core.take_outgoing().empty());
  EXPECT_EQ(core.next_deadline(), SteadyTime::max());
  // And deaf: a real announcement from b (paired with a) is not examined.
  auto bc = b.core({b.pair_with(a)});
  bc.start(t0);
  bc.on_timer(t0);
  EXPECT_FALSE(core.on_datagram(bc.take_outgoing()[0], "10.0.0.2", t0).has_value());
}

TEST(LanDiscoveryCore, OnlyPairedPeersRecogniseAnAnnouncement) {
  Node a(7001), b(7002), c(7003);
  auto ac = a.core({a.pair_with(b)}, 1);
  auto bc = b.core({b.pair_with(a), b.pair_with(c)}, 2);
  // c knows a's id and lists it as a peer, but a never paired with c.
  auto cc = c.core({c.pair_with(a), c.pair_with(b)}, 3);
  for (auto* core : {&ac, &bc, &cc}) core->start(t0);
  ac.on_timer(t0);
  Bytes from_a = ac.take_outgoing().at(0);

  auto seen = bc.on_datagram(from_a, "192.168.1.10", t0);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->peer, a.id());
  EXPECT_EQ(seen->address, "192.168.1.10");
  EXPECT_EQ(seen->port, 7001);
  EXPECT_FALSE(cc.on_datagram(from_a, "192.168.1.10", t0).has_value()) << "a stranger recognised a";
  // a's own announcement looping back is not a peer.
  EXPECT_FALSE(ac.on_datagram(from_a, "192.168.1.10", t0).has_value());
  // The same datagram again (two interfaces, or a replay) is reported once.
  EXPECT_FALSE(bc.on_datagram(from_a, "192.168.1.99", t0).has_value());
  // A changed port breaks the tag.
  auto decoded = decode_announcement(from_a).value();
  decoded.link_port = 9999;
  decoded.nonce[0] ^= 1;
  EXPECT_FALSE(bc.on_datagram(encode_announcement(decoded), "192.168.1.10", t0).has_value());
  // Garbage is ignored.
  EXPECT_FALSE(bc.on_datagram(as_bytes("hello"), "192.168.1.10", t0).has_value());
}

TEST(LanDiscoveryCore, AnswersAQueryAtOnceButAtMostOncePerGap) {
  Node a(7001), b(7002);
  auto ac = a.core({a.pair_with(b)}, 1);
  auto bc = b.core({b.pair_with(a)}, 2);
  ac.start(t0);
  bc.start(t0);
  bc.on_timer(t0);  // b's start-up announcements are out of the way
  bc.on_timer(t0 + milliseconds(1000));
  bc.take_outgoing();

  SteadyTime t = t0 + milliseconds(5000);
  ac.on_timer(t0);
  ASSERT_TRUE(bc.on_datagram(ac.take_outgoing().at(0), "10.0.0.1", t).has_value());
  EXPECT_EQ(bc.next_deadline(), t);
  bc.on_timer(t);
  auto answer = bc.take_outgoing();
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_FALSE(decode_announcement(answer[0])->query());
  auto heard = ac.on_datagram(answer[0], "10.0.0.2", t);
  ASSERT_TRUE(heard.has_value());
  EXPECT_EQ(heard->peer, b.id());
  EXPECT_EQ(heard->port, 7002);

  // a's second query 100 ms later: b answers only when the gap has passed.
  ac.on_timer(t0 + milliseconds(1000));
  ASSERT_TRUE(bc.on_datagram(ac.take_outgoing().at(0), "10.0.0.1", t + milliseconds(100)).has_value());
  EXPECT_EQ(bc.next_deadline(), t + milliseconds(1000));
  bc.on_timer(t + milliseconds(999));
  EXPECT_TRUE(bc.take_outgoing().empty());
  bc.on_timer(t + milliseconds(1000));
  EXPECT_EQ(bc.take_outgoing().size(), 1u);
}

TEST(LanDiscoveryCore, ManyPeersSpreadOverSeveralDatagrams) {
  Node a(7001);
  std::vector<Node> others;
  std::vector<PairedPeer> peers;
  for (int i = 0; i < 70; ++i) others.emplace_back(8000 + i);
  for (const auto& o : others) peers.push_back(a.pair_with(o));
  auto core = a.core(peers);
  core.start(t0);
  core.on_timer(t0);
  auto out = core.take_outgoing();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(decode_announcement(out[0])->tags.size(), 64u);
  EXPECT_EQ(decode_announcement(out[1])->tags.size(), 8u);  // 6 real, padded
  // The 70th peer finds itself in the second datagram.
  auto last = others.back().core({others.back().pair_with(a)});
  last.start(t0);
  EXPECT_FALSE(last.on_datagram(out[0], "10.0.0.1", t0).has_value());
  auto seen = last.on_datagram(out[1], "10.0.0.1", t0);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->peer, a.id());
}

TEST(LanDiscoveryCore, ExaminesABoundedNumberOfDatagramsPerSecond) {
  Node a(7001), b(7002);
  LanDiscoveryCore core(b.identity.public_key(), {.link_port = 7002, .max_datagrams_per_second = 10}, seeded(1));
  core.set_peers({b.pair_with(a)});
  core.start(t0);
  for (int i = 0; i < 25; ++i) (void)core.on_datagram(as_bytes("noise"), "10.0.0.9", t0);
  EXPECT_EQ(core.dropped(), 15u);
  // A genuine announcement in the same second is dropped too; a second later it gets through.
  auto ac = a.core({a.pair_with(b)});
  ac.start(t0);
  ac.on_timer(t0);
  Bytes from_a = ac.take_outgoing().at(0);
  EXPECT_FALSE(core.on_datagram(from_a, "10.0.0.1", t0).has_value());
  EXPECT_TRUE(core.on_datagram(from_a, "10.0.0.1", t0 + milliseconds(1000)).has_value());
}

}  // namespace
}  // namespace yonder::discovery
