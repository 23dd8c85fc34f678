// Hole punching in the NAT lab (scripts/natlab.sh): two real yonder-relay
// processes on the public router (198.18.0.1 and .2, both answering STUN on
// UDP 7851), a node in each home (a1, b1) with one UDP socket. Each node
// asks both relays for its public UDP address (NAT check), registers with
// the first relay declaring the other's key, and the two punch through the
// relay's real signal path (RelayClient::send_signal).
//   - preserving/preserving: both punch, and a datagram echo crosses the
//     punched path both ways; the time is reported, not asserted.
//   - symmetric on one side: the NAT check says so, and the two punch by
//     birthday probing (the symmetric side opens 256 ports, the other probes
//     random ports of its NAT); a datagram echo crosses the punched path
//     from the port it found. In 20 seeded trials it must punch at least 18
//     times, each within the packet bound.
//   - symmetric on both sides: both give up at once with the symmetric
//     reason, without probing.
// Both run a punch::PunchRouter, the piece yonderd wires in. Each node runs
// its own event loop on a thread inside its namespace, so every socket it
// makes (UDP, the relay's TLS) is made there.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <iostream>
#include <random>
#include <thread>

#include "crypto/identity.h"
#include "net/punch/nat_check.h"
#include "net/punch/punch_router.h"
#include "net/punch/udp_datagram_port.h"
#include "relay/client.h"
#include "support/live_process.h"
#include "support/nat_lab.h"
#include "support/node_loop.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using punch::udp;

constexpr int kRelayPort = 7851;

template <typename T>
T wait(std::future<T>& f, const char* what) {
  if (f.wait_for(30s) != std::future_status::ready) {
    ADD_FAILURE() << "timed out waiting for " << what;
    std::abort();  // a hung lab test must not hang ctest
  }
  return f.get();
}

// A yonder-relay in "pub" on `address`:7851 (TCP and UDP).
std::unique_ptr<LiveProcess> start_relay(const NatLab& lab, const TempDir& dir, const std::string& address,
                                         const std::string& name) {
  auto p = std::make_unique<LiveProcess>(
      std::vector<std::string>{ip_program(), "netns", "exec", lab.netns("pub"), program_path("yonder-relay"),
                               "--listen", address + ":" + std::to_string(kRelayPort), "--metrics", "off", "--key-file",
                               dir / (name + ".key")},
      Env{});
  EXPECT_TRUE(p->wait_for("listen ", 20s)) << p->output();
  return p;
}

// One node: its UDP socket (demultiplexed as yonderd would: STUN to the
// check, punch packets and punch signals to the PunchRouter, anything else
// is the test's echo), its NAT check, its relay client, its punch router.
struct PunchNode {
  PunchNode(const NatLab& lab, const std::string& node, const std::string& ip) : loop(lab, node), host_ip(ip) {}

  NodeLoop loop;
  std::string host_ip;
  Identity identity = Identity::generate().value();
  PublicKeyBytes peer{};
  std::unique_ptr<punch::UdpDatagramPort> port;
  std::shared_ptr<punch::NatCheckSession> check;
  std::optional<punch::NatCheckResult> nat;
  std::shared_ptr<relay::RelayClient> client;
  std::unique_ptr<punch::PunchRouter> router;
  std::promise<punch::NatCheckResult> checked;
  std::promise<Status> registered;
  std::promise<punch::PunchOutcome> outcome;
  std::promise<std::string> echoed;
  std::mt19937_64 rng{0};  // the punch sessions' randomness (seed it on the loop)

  punch::PuncherConfig config() const {
    punch::PuncherConfig c;
    c.nat = nat->nat;
    c.candidates.push_back(
        {udp::endpoint(asio::ip::make_address(host_ip), port->local_endpoint().port()), punch::CandidateKind::kHost});
    if (nat->public_address) c.candidates.push_back({*nat->public_address, punch::CandidateKind::kServerReflexive});
    return c;
  }

  void make_router() {
    punch::PunchRouter::Hooks h;
    h.config_for = [this](const PublicKeyBytes& from) -> std::optional<punch::PuncherConfig> {
      if (from != peer) return std::nullopt;
      return config();
    };
    h.send_signal = [this](const PublicKeyBytes& to, Bytes b) { client->send_signal(to, std::move(b), [](Status) {}); };
    h.done = [this](const PublicKeyBytes&, const punch::PunchOutcome& o) { outcome.set_value(o); };
    h.random = [this] { return rng(); };
    router = std::make_unique<punch::PunchRouter>(loop.io, *port, identity.public_key(), h);
  }

  void on_datagram(const udp::endpoint& from, ByteView bytes) {
    switch (punch::classify_datagram(bytes)) {
      case punch::DatagramKind::kStun:
        if (check) check->on_datagram(from, bytes);
        return;
      case punch::DatagramKind::kPunch:
        if (router) router->on_datagram(from, bytes);
        return;
      default: break;
    }
    std::string text(bytes.begin(), bytes.end());
    if (text.rfind("ping:", 0) == 0) {
      port->send_to(from, as_bytes("pong:" + text.substr(5)), std::nullopt);
    } else if (text.rfind("pong:", 0) == 0) {
      echoed.set_value(text.substr(5) + " from " + from.address().to_string() + ":" + std::to_string(from.port()));
    }
  }

  void on_signal(const PublicKeyBytes& from, Bytes data) {
    if (router && !router->on_signal(from, data)) ADD_FAILURE() << "a signal that is not for punching";
  }

  // Opens the socket, runs the NAT check against both relays, then registers.
  void bring_up(const std::vector<udp::endpoint>& stun_servers, const std::string& relay_address) {
    loop.on([&] {
      port = punch::UdpDatagramPort::open(loop.io, udp::endpoint(asio::ip::address_v4::any(), 0)).value();
      port->start([this](const udp::endpoint& from, ByteView bytes) { on_datagram(from, bytes); });
      check = punch::NatCheckSession::start(loop.io, *port, {.servers = stun_servers},
                                            [this, relay_address](const punch::NatCheckResult& r) {
                                              nat = r;
                                              make_router();
                                              checked.set_value(r);
                                              connect(relay_address);
                                            });
      return 0;
    });
  }

  void connect(const std::string& relay_address) {
    relay::RelayClientConfig c;
    c.address = relay_address;
    c.peers = {peer};
    client = relay::RelayClient::create(loop.io, identity, c).value();
    relay::RelayClient::Handlers h;
    h.signal = [this](const PublicKeyBytes& from, Bytes d, const std::string&) { on_signal(from, std::move(d)); };
    client->connect(
        h, [this](Result<relay::Registration> r) { registered.set_value(r ? ok_status() : Status(r.error())); });
  }

  void shut_down() {
    loop.on([&] {
      if (router) router->stop();
      if (client) client->close();
      if (check) check->cancel();
      if (port) port->close();
      router.reset();
      client.reset();
      check.reset();
      port.reset();
      return 0;
    });
  }
};

double ms(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The lab, two relays and a node in each home, NAT-checked and registered.
struct LabPair {
  LabPair(NatMode mode_a, NatMode mode_b)
      : lab({.nat_a = mode_a, .nat_b = mode_b}), a(lab, "a1", lab.address("a1")), b(lab, "b1", lab.address("b1")) {
    relay1 = start_relay(lab, dir, lab.server_address(), "relay1");
    relay2 = start_relay(lab, dir, lab.server2_address(), "relay2");
    a.peer = b.identity.public_key();
    b.peer = a.identity.public_key();
  }
  ~LabPair() {
    a.shut_down();
    b.shut_down();
  }

  // Brings both nodes up and checks what each NAT check saw.
  void bring_up(NatMode mode_a, NatMode mode_b) {
    std::vector<udp::endpoint> stun = {udp::endpoint(asio::ip::make_address(lab.server_address()), kRelayPort),
                                       udp::endpoint(asio::ip::make_address(lab.server2_address()), kRelayPort)};
    std::string relay_address = lab.server_address() + ":" + std::to_string(kRelayPort);
    auto fa_checked = a.checked.get_future();
    auto fb_checked = b.checked.get_future();
    auto fa_reg = a.registered.get_future();
    auto fb_reg = b.registered.get_future();
    a.bring_up(stun, relay_address);
    b.bring_up(stun, relay_address);
    // The NAT check: each side seen at its NAT's public address, with the verdict of its NAT mode.
    auto check_a = wait(fa_checked, "a1's NAT check");
    auto check_b = wait(fb_checked, "b1's NAT check");
    for (auto [check, mode, nat_key] : {std::tuple(&check_a, mode_a, "nat-a"), std::tuple(&check_b, mode_b, "nat-b")}) {
      SCOPED_TRACE(nat_key);
      ASSERT_TRUE(check->public_address) << check->why << "\n" << lab.status();
      EXPECT_EQ(check->public_address->address().to_string(), lab.address(nat_key));
      EXPECT_EQ(check->nat, mode == NatMode::kPreserving ? punch::NatKind::kPunchable : punch::NatKind::kSymmetric)
          << check->why;
      std::cout << "[ netcheck ] " << nat_key << ": " << punch::nat_kind_name(check->nat) << ": " << check->why << "\n";
    }
    auto reg_a = wait(fa_reg, "a1's registration");
    auto reg_b = wait(fb_reg, "b1's registration");
    ASSERT_TRUE(reg_a) << reg_a.error().to_string() << "\n" << relay1->output();
    ASSERT_TRUE(reg_b) << reg_b.error().to_string() << "\n" << relay1->output();
  }

  // One punch, a1 initiating, with both sides' randomness seeded.
  std::pair<punch::PunchOutcome, punch::PunchOutcome> punch(uint64_t seed) {
    for (auto* n : {&a, &b}) {
      n->loop.on([&] {
        n->outcome = {};
        n->rng.seed(seed * 2 + (n == &a ? 0 : 1));
        return 0;
      });
    }
    auto fa_out = a.outcome.get_future();
    auto fb_out = b.outcome.get_future();
    a.loop.on([&] {
      a.router->punch(a.peer);
      return 0;
    });
    auto out_a = wait(fa_out, "a1's punch outcome");
    auto out_b = wait(fb_out, "b1's punch outcome");
    std::cout << "[ punch    ] a1: " << (out_a.punched() ? "punched" : out_a.reason) << " after "
              << ms(out_a.elapsed) << " ms (direct rtt " << ms(out_a.rtt) << " ms, " << out_a.datagrams
              << " datagrams); b1: " << (out_b.punched() ? "punched" : out_b.reason) << " after " << ms(out_b.elapsed)
              << " ms (" << out_b.datagrams << " datagrams)\n";
    return {out_a, out_b};
  }

  // A ping from `from` along its punched path comes back from the far NAT's
  // public address. A birthday port's path runs from that port: taken over
  // from the session, as yonderd hands it to QUIC.
  void expect_echo(PunchNode& from, const punch::PunchOutcome& o, const std::string& far_nat) {
    std::string echo;
    if (o.via == 0) {
      from.echoed = {};
      auto f = from.echoed.get_future();
      from.loop.on([&] {
        from.port->send_to(o.remote, as_bytes("ping:" + from.identity.node_id().short_form()), std::nullopt);
        return 0;
      });
      echo = wait(f, "the echo");
    } else {
      std::promise<std::string> got;
      auto f = got.get_future();
      std::optional<udp::socket> socket;
      std::array<uint8_t, 256> buf{};
      udp::endpoint sender;
      std::function<void(boost::system::error_code, size_t)> receive;
      from.loop.on([&] {
        auto taken = from.router->take_port(from.peer, o.via);
        if (!taken) {
          got.set_value("not taken: " + taken.error().message());
          return 0;
        }
        socket.emplace(std::move(*taken));
        std::string ping = "ping:" + from.identity.node_id().short_form();
        socket->send_to(asio::buffer(ping), o.remote);
        // The peer's last punch packets (a probe, an ack) may still come to
        // this port: only the pong counts.
        receive = [&](boost::system::error_code ec, size_t n) {
          if (ec) return got.set_value("error: " + ec.message());
          std::string text(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
          if (text.rfind("pong:", 0) != 0) return socket->async_receive_from(asio::buffer(buf), sender, receive);
          got.set_value(text.substr(5) + " from " + sender.address().to_string() + ":" + std::to_string(sender.port()));
        };
        socket->async_receive_from(asio::buffer(buf), sender, receive);
        return 0;
      });
      echo = wait(f, "the echo through the birthday port");
      from.loop.on([&] {
        socket.reset();
        return 0;
      });
    }
    EXPECT_EQ(echo.rfind(from.identity.node_id().short_form() + " from " + lab.address(far_nat) + ":", 0), 0u)
        << echo;
  }

  NatLab lab;
  TempDir dir;
  std::unique_ptr<LiveProcess> relay1, relay2;
  PunchNode a, b;
};

class PunchLab : public ::testing::TestWithParam<std::pair<NatMode, NatMode>> {
 protected:
  void SetUp() override { YONDER_SKIP_WITHOUT_NAT_LAB(); }
};

TEST_P(PunchLab, PunchesUnlessBothNatsAreSymmetric) {
  auto [mode_a, mode_b] = GetParam();
  LabPair pair(mode_a, mode_b);
  ASSERT_NO_FATAL_FAILURE(pair.bring_up(mode_a, mode_b));
  auto [out_a, out_b] = pair.punch(1);
  RecordProperty("punch_ms_a1", std::to_string(ms(out_a.elapsed)));

  if (mode_a == NatMode::kSymmetric && mode_b == NatMode::kSymmetric) {
    for (const auto* o : {&out_a, &out_b}) {
      EXPECT_FALSE(o->punched());
      EXPECT_EQ(o->failure, punch::PunchFailure::kLocalSymmetric)
          << punch::punch_failure_name(o->failure) << ": " << o->reason;
      EXPECT_NE(o->reason.find("both NATs are symmetric"), std::string::npos) << o->reason;
      EXPECT_EQ(o->datagrams, 0u);
      // Given up after the signals, not after a punching window.
      EXPECT_LT(o->elapsed, 2s) << o->reason;
    }
    return;
  }
  ASSERT_TRUE(out_a.punched()) << out_a.reason;
  ASSERT_TRUE(out_b.punched()) << out_b.reason;
  bool birthday = mode_a != mode_b;
  EXPECT_EQ(out_a.birthday, birthday);
  EXPECT_EQ(out_b.birthday, birthday);
  // Each found the other at its NAT's public address.
  EXPECT_EQ(out_a.remote.address().to_string(), pair.lab.address("nat-b"));
  EXPECT_EQ(out_b.remote.address().to_string(), pair.lab.address("nat-a"));
  // The symmetric side's path runs from one of its birthday ports.
  EXPECT_EQ(out_a.via >= 1, mode_a == NatMode::kSymmetric && birthday);
  EXPECT_EQ(out_b.via >= 1, mode_b == NatMode::kSymmetric && birthday);
  // Datagrams cross the punched path both ways: a ping each way, answered
  // (a birthday path: from the symmetric side's port, answered there).
  if (!birthday || mode_a == NatMode::kSymmetric) pair.expect_echo(pair.a, out_a, "nat-b");
  if (!birthday || mode_b == NatMode::kSymmetric) pair.expect_echo(pair.b, out_b, "nat-a");
}

INSTANTIATE_TEST_SUITE_P(NatPairs, PunchLab,
                         ::testing::Values(std::make_pair(NatMode::kPreserving, NatMode::kPreserving),
                                           std::make_pair(NatMode::kSymmetric, NatMode::kPreserving),
                                           std::make_pair(NatMode::kPreserving, NatMode::kSymmetric),
                                           std::make_pair(NatMode::kSymmetric, NatMode::kSymmetric)),
                         [](const auto& param_info) {
                           return std::string(nat_mode_name(param_info.param.first)) + "_" +
                                  nat_mode_name(param_info.param.second);
                         });

// Birthday probing in the lab: a1 behind MASQUERADE --random-fully, b1
// behind a port-preserving MASQUERADE. 20 seeded trials (the NATs' own port
// choices are the kernel's); at least 18 must punch, and none may send more
// than its bound: the symmetric side 256 ports plus its rounds to b1's one
// host candidate, the other 1,024 probes plus its rounds, a few acks on top,
// for each of the initiator's 2 attempts.
TEST(PunchLabBirthday, OneSymmetricNatIsCrossedInMostOfTwentySeededTrials) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  LabPair pair(NatMode::kSymmetric, NatMode::kPreserving);
  ASSERT_NO_FATAL_FAILURE(pair.bring_up(NatMode::kSymmetric, NatMode::kPreserving));
  constexpr int kTrials = 20;
  constexpr size_t kRounds = 3000 / 25 + 1;
  int punched = 0;
  std::vector<double> times;
  for (int seed = 1; seed <= kTrials; ++seed) {
    SCOPED_TRACE("trial " + std::to_string(seed));
    auto [hard, easy] = pair.punch(static_cast<uint64_t>(seed));
    EXPECT_TRUE(hard.birthday && easy.birthday);
    EXPECT_LE(hard.datagrams, static_cast<size_t>(hard.attempts) * (256 + kRounds + 8));
    EXPECT_LE(easy.datagrams, static_cast<size_t>(hard.attempts) * (1024 + kRounds + 8));
    if (!hard.punched()) continue;
    ASSERT_TRUE(easy.punched()) << easy.reason;
    ++punched;
    times.push_back(ms(hard.elapsed));
    EXPECT_GE(hard.via, 1);
    pair.expect_echo(pair.a, hard, "nat-b");
  }
  std::sort(times.begin(), times.end());
  std::cout << "[ birthday ] punched " << punched << " of " << kTrials << " trials; median "
            << (times.empty() ? 0.0 : times[times.size() / 2]) << " ms\n";
  RecordProperty("birthday_punched", std::to_string(punched));
  EXPECT_GE(punched, 18);
}

}  // namespace
}  // namespace yonder::testing
