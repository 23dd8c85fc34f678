// PunchRouter (net/punch/punch_router.h): two routers on one event loop,
// joined by an in-memory datagram path and an in-memory signal channel (no
// NAT: the state machine's NAT cases are in puncher_test.cpp).
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "net/punch/punch_router.h"

namespace yonder::punch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

struct Node;

// Delivers to the other node's router on the next turn of the loop.
class MemPort final : public DatagramPort {
 public:
  MemPort(asio::io_context& io, udp::endpoint self) : io_(io), self_(self) {}
  void connect(Node* other) { other_ = other; }
  void send_to(const udp::endpoint& to, ByteView bytes, std::optional<int> ttl) override;
  udp::endpoint self() const { return self_; }

 private:
  asio::io_context& io_;
  udp::endpoint self_;
  Node* other_ = nullptr;
};

struct Node {
  Node(asio::io_context& io, uint8_t key_byte, uint16_t udp_port)
      : key{key_byte},
        port(io, udp::endpoint(asio::ip::make_address("127.0.0.1"), udp_port)),
        router(io, port, key, hooks()) {}

  PunchRouter::Hooks hooks() {
    PunchRouter::Hooks h;
    h.config_for = [this](const PublicKeyBytes&) -> std::optional<PuncherConfig> {
      if (!accept) return std::nullopt;
      PuncherConfig c;
      c.candidates = {Candidate{port.self(), CandidateKind::kHost}};
      c.nat = NatKind::kPunchable;
      c.signal_timeout = 300ms;
      c.linger = 200ms;
      return c;
    };
    h.send_signal = [this](const PublicKeyBytes&, Bytes b) {
      Node* o = other;
      PublicKeyBytes from = key;
      asio::post(io(), [o, from, b] { o->router.on_signal(from, b); });
    };
    h.done = [this](const PublicKeyBytes&, const PunchOutcome& o) { outcomes.push_back(o); };
    return h;
  }
  asio::io_context& io();

  PublicKeyBytes key;
  MemPort port;
  PunchRouter router;
  Node* other = nullptr;
  asio::io_context* loop = nullptr;
  bool accept = true;
  std::vector<PunchOutcome> outcomes;
};

asio::io_context& Node::io() {
  return *loop;
}

void MemPort::send_to(const udp::endpoint& to, ByteView bytes, std::optional<int>) {
  if (to != other_->port.self()) return;
  Node* o = other_;
  udp::endpoint from = self_;
  Bytes copy(bytes.begin(), bytes.end());
  asio::post(io_, [o, from, copy] { o->router.on_datagram(from, copy); });
}

struct Pair {
  asio::io_context io;
  Node a{io, 1, 1000}, b{io, 2, 2000};  // a has the smaller key: a initiates on glare
  Pair() {
    a.loop = b.loop = &io;
    a.other = &b;
    b.other = &a;
    a.port.connect(&b);
    b.port.connect(&a);
  }
  void run_until_outcomes() {
    auto until = std::chrono::steady_clock::now() + 10s;
    while ((a.outcomes.empty() || b.outcomes.empty()) && std::chrono::steady_clock::now() < until) {
      io.restart();
      io.run_for(10ms);
    }
  }
};

TEST(PunchRouter, EitherSideStartsAndBothGetTheirOutcome) {
  Pair p;
  p.b.router.punch(p.a.key);  // the larger key may start too
  EXPECT_TRUE(p.b.router.punching(p.a.key));
  p.run_until_outcomes();
  ASSERT_EQ(p.a.outcomes.size(), 1u);
  ASSERT_EQ(p.b.outcomes.size(), 1u);
  EXPECT_TRUE(p.a.outcomes[0].punched()) << p.a.outcomes[0].reason;
  EXPECT_TRUE(p.b.outcomes[0].punched()) << p.b.outcomes[0].reason;
  EXPECT_EQ(p.a.outcomes[0].remote, p.b.port.self());
  EXPECT_EQ(p.b.outcomes[0].remote, p.a.port.self());
  EXPECT_FALSE(p.b.router.punching(p.a.key));
}

TEST(PunchRouter, BothStartingAtOnceEndsInOnePunch) {
  Pair p;
  p.a.router.punch(p.b.key);
  p.b.router.punch(p.a.key);
  p.run_until_outcomes();
  // Let any stray second outcome show up.
  p.io.restart();
  p.io.run_for(100ms);
  ASSERT_EQ(p.a.outcomes.size(), 1u);
  ASSERT_EQ(p.b.outcomes.size(), 1u);
  EXPECT_TRUE(p.a.outcomes[0].punched()) << p.a.outcomes[0].reason;
  EXPECT_TRUE(p.b.outcomes[0].punched()) << p.b.outcomes[0].reason;
}

TEST(PunchRouter, OffersFromRefusedPeersAreIgnored) {
  Pair p;
  p.a.accept = false;
  p.b.router.punch(p.a.key);
  auto until = std::chrono::steady_clock::now() + 10s;
  while (p.b.outcomes.empty() && std::chrono::steady_clock::now() < until) {
    p.io.restart();
    p.io.run_for(10ms);
  }
  ASSERT_EQ(p.b.outcomes.size(), 1u);
  EXPECT_EQ(p.b.outcomes[0].failure, PunchFailure::kSignalTimeout) << p.b.outcomes[0].reason;
  EXPECT_TRUE(p.a.outcomes.empty());
}

TEST(PunchRouter, LeavesOtherSignalsToTheCaller) {
  Pair p;
  EXPECT_FALSE(p.a.router.on_signal(p.b.key, as_bytes(R"({"v":1,"mapped":"203.0.113.2:7850"})")));
  EXPECT_TRUE(p.a.router.on_signal(p.b.key, as_bytes("YPS\x01garbage")));
  EXPECT_FALSE(p.a.router.on_datagram(p.b.port.self(), as_bytes("not a punch packet")));
}

}  // namespace
}  // namespace yonder::punch
