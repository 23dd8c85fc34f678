// The relay's STUN responder (relay/stun_responder.h) over real UDP sockets
// on loopback: same port number as TCP, the NAT check against two relay
// addresses, garbage ignored, answers held to their budget.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>

#include "crypto/identity.h"
#include "net/punch/nat_check.h"
#include "net/punch/udp_datagram_port.h"
#include "relay/server.h"

namespace yonder::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using punch::udp;

// Runs the loop until `done` holds (or 10 s: then the test fails).
void run_until(asio::io_context& io, const std::function<bool()>& done) {
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(20ms);
  }
  ASSERT_TRUE(done()) << "timed out";
}

TEST(RelayStun, AnswersOnTheTcpPortNumberAndGivesANatVerdict) {
  asio::io_context io;
  Identity id = Identity::generate().value();
  RelayServer one(io, id, RelayConfig{}), two(io, id, RelayConfig{});
  ASSERT_TRUE(one.listen("127.0.0.1:0"));
  ASSERT_TRUE(two.listen("127.0.0.2:0"));
  ASSERT_TRUE(one.stun_endpoint());
  EXPECT_EQ(one.stun_endpoint()->port(), one.local_endpoint().port());
  EXPECT_EQ(one.stun_endpoint()->address(), one.local_endpoint().address());

  auto port = punch::UdpDatagramPort::open(io, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)).value();
  std::shared_ptr<punch::NatCheckSession> check;
  port->start([&](const udp::endpoint& from, ByteView bytes) {
    if (check) check->on_datagram(from, bytes);
  });
  std::optional<punch::NatCheckResult> result;
  check = punch::NatCheckSession::start(io, *port, {.servers = {*one.stun_endpoint(), *two.stun_endpoint()}},
                                        [&](const punch::NatCheckResult& r) { result = r; });
  run_until(io, [&] { return result.has_value(); });
  EXPECT_EQ(result->nat, punch::NatKind::kPunchable) << result->why;
  EXPECT_EQ(result->public_address, port->local_endpoint()) << "no NAT on loopback";
  EXPECT_EQ(one.metrics().stun_answered_total, 1u);
  EXPECT_NE(one.metrics_text().find("yonder_relay_stun_answered_total 1\n"), std::string::npos);

  // Anything but a Binding request is dropped and counted.
  port->send_to(*one.stun_endpoint(), as_bytes("GET / HTTP/1.0\r\n\r\n"), std::nullopt);
  run_until(io, [&] { return one.metrics().stun_ignored_total == 1; });
  EXPECT_EQ(one.metrics().stun_answered_total, 1u);
}

// Bound to a wildcard address, the relay answers from the address each
// request was sent to (the NAT check ignores answers from anywhere else).
TEST(RelayStun, AWildcardRelayAnswersFromTheAddressAsked) {
  asio::io_context io;
  Identity id = Identity::generate().value();
  RelayServer relay(io, id, RelayConfig{});
  ASSERT_TRUE(relay.listen("0.0.0.0:0"));
  uint16_t p = relay.stun_endpoint()->port();
  auto port = punch::UdpDatagramPort::open(io, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)).value();
  std::shared_ptr<punch::NatCheckSession> check;
  port->start([&](const udp::endpoint& from, ByteView bytes) {
    if (check) check->on_datagram(from, bytes);
  });
  std::optional<punch::NatCheckResult> result;
  check = punch::NatCheckSession::start(io, *port,
                                        {.servers = {udp::endpoint(asio::ip::make_address("127.0.0.1"), p),
                                                     udp::endpoint(asio::ip::make_address("127.0.0.3"), p)}},
                                        [&](const punch::NatCheckResult& r) { result = r; });
  run_until(io, [&] { return result.has_value(); });
  EXPECT_EQ(result->nat, punch::NatKind::kPunchable) << result->why;
  ASSERT_EQ(result->servers.size(), 2u);
  EXPECT_TRUE(result->servers[1].mapped) << "no answer from 127.0.0.3";
  EXPECT_EQ(relay.metrics().stun_answered_total, 2u);
}

TEST(RelayStun, AnswersAreHeldToTheirBudget) {
  asio::io_context io;
  Identity id = Identity::generate().value();
  RelayConfig cfg;
  cfg.stun_rate = 0.001;  // effectively only the burst
  cfg.stun_burst = 2;
  RelayServer relay(io, id, cfg);
  ASSERT_TRUE(relay.listen("127.0.0.1:0"));
  auto port = punch::UdpDatagramPort::open(io, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)).value();
  int answers = 0;
  port->start([&](const udp::endpoint&, ByteView bytes) { answers += punch::looks_like_stun(bytes) ? 1 : 0; });
  for (int i = 0; i < 5; ++i) {
    port->send_to(*relay.stun_endpoint(), punch::encode_binding_request(punch::random_transaction_id()), std::nullopt);
  }
  run_until(io, [&] { return relay.metrics().stun_answered_total + relay.metrics().stun_rate_limited_total == 5; });
  EXPECT_EQ(relay.metrics().stun_answered_total, 2u);
  EXPECT_EQ(relay.metrics().stun_rate_limited_total, 3u);
  run_until(io, [&] { return answers == 2; });
}

TEST(RelayStun, CanBeTurnedOff) {
  asio::io_context io;
  Identity id = Identity::generate().value();
  RelayConfig cfg;
  cfg.stun = false;
  RelayServer relay(io, id, cfg);
  ASSERT_TRUE(relay.listen("127.0.0.1:0"));
  EXPECT_FALSE(relay.stun_endpoint());
}

}  // namespace
}  // namespace yonder::relay
