// The relay server and client over real loopback sockets and real TLS, all
// on one event loop in the test thread: registration bound to the TLS key,
// observed address and NAT probe, signals only between mutual peers, pipes
// carrying an end-to-end TLS session the relay cannot read, per-node
// bandwidth, idle timeouts, connection limits, clean shutdown and the
// metrics page. Waits on events (await), never on sleeps.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <nlohmann/json.hpp>

#include "crypto/identity.h"
#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "relay/client.h"
#include "relay/control_channel.h"
#include "relay/server.h"

namespace yonder::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using nlohmann::json;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

// What a test node saw.
struct Node {
  std::unique_ptr<Identity> id;
  std::shared_ptr<RelayClient> client;
  std::optional<Result<Registration>> registered;
  std::vector<std::pair<PublicKeyBytes, Bytes>> signals;
  std::vector<std::string> signal_hosts;  // where the relay saw each signal's sender
  std::vector<PublicKeyBytes> wanted;
  std::optional<Error> closed;
  bool accept_pipes = false;  // answer pipe_wanted with open_pipe
  std::vector<Result<RelayPipe>> pipes;
};

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override { relay_id_ = std::make_unique<Identity>(Identity::generate().value()); }

  void TearDown() override {
    for (auto& n : nodes_) {
      if (n->client) n->client->close();
    }
    if (relay_) relay_->stop();
    io_.restart();
    io_.run_for(300ms);
  }

  static RelayConfig config() {
    RelayConfig c;
    c.node_rate = 0;  // tests that want limits set them
    return c;
  }

  void start(RelayConfig c = config()) {
    relay_ = std::make_unique<RelayServer>(io_, *relay_id_, c);
    ASSERT_TRUE(relay_->listen("127.0.0.1:0"));
    address_ = "127.0.0.1:" + std::to_string(relay_->local_endpoint().port());
  }

  // Runs the loop until pred() holds; false after `timeout`.
  template <typename Pred>
  bool await(Pred pred, std::chrono::milliseconds timeout = 10s) {
    auto deadline = SteadyClock::now() + timeout;
    while (!pred()) {
      if (SteadyClock::now() >= deadline) return false;
      if (io_.stopped()) io_.restart();
      // Short slices: some awaited events come from other threads (an HTTP GET).
      if (io_.run_one_for(std::min<SteadyClock::duration>(deadline - SteadyClock::now(), 20ms)) == 0) {
        std::this_thread::yield();
      }
    }
    return true;
  }

  Node& add_node() {
    auto n = std::make_unique<Node>();
    n->id = std::make_unique<Identity>(Identity::generate().value());
    nodes_.push_back(std::move(n));
    return *nodes_.back();
  }

  // Connects `n` declaring `peers`; waits for the registration.
  void connect(Node& n, std::vector<Node*> peers, std::chrono::milliseconds keepalive = 25s) {
    RelayClientConfig cfg;
    cfg.address = address_;
    cfg.relay_key = relay_->key();
    cfg.keepalive = keepalive;
    for (Node* p : peers) cfg.peers.push_back(p->id->public_key());
    auto c = RelayClient::create(io_, *n.id, cfg);
    ASSERT_TRUE(c);
    n.client = *c;
    RelayClient::Handlers h;
    h.signal = [&n](const PublicKeyBytes& from, Bytes data, const std::string& from_host) {
      n.signals.emplace_back(from, std::move(data));
      n.signal_hosts.push_back(from_host);
    };
    h.pipe_wanted = [&n](const PublicKeyBytes& from) {
      n.wanted.push_back(from);
      if (n.accept_pipes) n.client->open_pipe(from, [&n](Result<RelayPipe> p) { n.pipes.push_back(std::move(p)); });
    };
    h.closed = [&n](const Error& e) { n.closed = e; };
    n.client->connect(h, [&n](Result<Registration> r) { n.registered = std::move(r); });
    ASSERT_TRUE(await([&] { return n.registered.has_value(); }));
    ASSERT_TRUE(*n.registered) << n.registered->error().to_string();
  }

  // A opens a pipe to B, B accepts; both ends.
  std::pair<RelayPipe, RelayPipe> pipe_between(Node& a, Node& b) {
    b.accept_pipes = true;
    std::optional<Result<RelayPipe>> mine;
    size_t before = b.pipes.size();
    a.client->open_pipe(b.id->public_key(), [&](Result<RelayPipe> p) { mine = std::move(p); });
    EXPECT_TRUE(await([&] { return mine.has_value() && b.pipes.size() > before; }));
    EXPECT_TRUE(*mine) << mine->error().to_string();
    EXPECT_TRUE(b.pipes.back()) << b.pipes.back().error().to_string();
    return {std::move(**mine), std::move(*b.pipes.back())};
  }

  Status signal(Node& from, Node& to, Bytes data) {
    std::optional<Status> st;
    from.client->send_signal(to.id->public_key(), std::move(data), [&](Status s) { st = std::move(s); });
    EXPECT_TRUE(await([&] { return st.has_value(); }));
    return *st;
  }

  asio::io_context io_;
  std::unique_ptr<Identity> relay_id_;
  std::unique_ptr<RelayServer> relay_;
  std::string address_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

// A node that speaks the control protocol by hand (to try what RelayClient never would).
struct RawNode {
  std::shared_ptr<link::TlsContext> ctx;
  std::shared_ptr<ControlChannel> chan;
  std::vector<json> got;
  std::optional<Error> closed;
  bool handshake_done = false;
};

TEST_F(RelayTest, RegistersAndReportsObservedAddressAndNat) {
  start();
  Node& a = add_node();
  connect(a, {});
  const Registration& reg = **a.registered;
  EXPECT_EQ(reg.relay_key, relay_->key());
  EXPECT_EQ(reg.nat.observed.ip, "127.0.0.1");
  EXPECT_NE(reg.nat.observed.port, 0);
  // On loopback nothing translates: the observed address is the local one.
  EXPECT_EQ(reg.nat.mapping, Mapping::kNone);
  EXPECT_EQ(reg.nat.nat, NatVerdict::kNone);
  EXPECT_EQ(reg.nat.samples, 1u);
  EXPECT_EQ(relay_->gauges().nodes, 1u);

  // A second registration from another local socket: two samples.
  std::optional<Result<NatReport>> probe;
  a.client->probe_nat([&](Result<NatReport> r) { probe = std::move(r); });
  ASSERT_TRUE(await([&] { return probe.has_value(); }));
  ASSERT_TRUE(*probe) << probe->error().to_string();
  EXPECT_EQ((*probe)->samples, 2u);
  EXPECT_EQ((*probe)->nat, NatVerdict::kNone);
  EXPECT_NE((*probe)->observed.port, reg.nat.observed.port);
  ASSERT_TRUE(await([&] { return relay_->gauges().registrations == 1; }));  // the probe left
  EXPECT_EQ(relay_->metrics().registrations_total, 2u);
}

TEST_F(RelayTest, RegistrationIsBoundToTheTlsKeyAndMessagesAreBounded) {
  start();
  Node& victim = add_node();
  auto attacker = Identity::generate().value();
  auto open_raw = [&](RawNode& raw) {
    raw.ctx = link::TlsContext::create(attacker, false).value();
    tcp::socket s(io_);
    s.connect(relay_->local_endpoint());
    auto tls = std::make_shared<link::TlsChannel>(std::move(s), raw.ctx->native(), false);
    link::TlsContext::set_policy(tls->native_handle(), [](const PublicKeyBytes&) { return link::KeyVerdict::kPinned; });
    tls->async_handshake([&raw](boost::system::error_code ec) { raw.handshake_done = !ec; });
    ASSERT_TRUE(await([&] { return raw.handshake_done; }));
    raw.chan = std::make_shared<ControlChannel>(tls);
    raw.chan->start([&raw](json j) { raw.got.push_back(std::move(j)); }, [&raw](const Error& e) { raw.closed = e; });
  };

  // The attacker's TLS session proves its own key; it claims the victim's.
  RawNode impostor;
  open_raw(impostor);
  impostor.chan->send(to_json(ClientMessage(Register{victim.id->public_key(), {}, {}, std::nullopt, false})));
  ASSERT_TRUE(await([&] { return impostor.closed.has_value(); }));
  ASSERT_EQ(impostor.got.size(), 1u);
  EXPECT_EQ(impostor.got[0]["type"], "error");
  EXPECT_EQ(impostor.got[0]["code"], "identity_mismatch");
  EXPECT_EQ(relay_->metrics().refusals_of(Reason::kIdentityMismatch), 1u);
  EXPECT_EQ(relay_->gauges().nodes, 0u);

  // Anything before register is refused.
  RawNode early;
  open_raw(early);
  early.chan->send(to_json(ClientMessage(Ping{1})));
  ASSERT_TRUE(await([&] { return early.closed.has_value(); }));
  ASSERT_FALSE(early.got.empty());
  EXPECT_EQ(early.got[0]["code"], "not_registered");

  // A signal over the protocol's bound ends the connection.
  RawNode big;
  open_raw(big);
  big.chan->send(to_json(ClientMessage(Register{attacker.public_key(), {}, {}, std::nullopt, false})));
  ASSERT_TRUE(await([&] { return !big.got.empty(); }));
  EXPECT_EQ(big.got[0]["type"], "registered");
  big.chan->send(json{{"type", "signal"},
                      {"id", 2},
                      {"to", NodeId(victim.id->public_key()).to_string()},
                      {"data", base64_encode(Bytes(kMaxSignalBytes + 1, 'x'))}});
  ASSERT_TRUE(await([&] { return big.closed.has_value(); }));
  EXPECT_EQ(big.got.back()["code"], "too_large");
}

TEST_F(RelayTest, ClientRefusesARelayWithAnotherKey) {
  start();
  Node& a = add_node();
  RelayClientConfig cfg;
  cfg.address = address_;
  cfg.relay_key = Identity::generate().value().public_key();  // not the relay's
  auto c = RelayClient::create(io_, *a.id, cfg).value();
  a.client = c;
  std::optional<Result<Registration>> r;
  c->connect({}, [&](Result<Registration> res) { r = std::move(res); });
  ASSERT_TRUE(await([&] { return r.has_value(); }));
  ASSERT_FALSE(*r);
  EXPECT_EQ(r->error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(r->error().message().find("proved key"), std::string::npos) << r->error().message();
}

TEST_F(RelayTest, SignalsOnlyBetweenMutuallyDeclaredPeers) {
  start();
  Node& a = add_node();
  Node& b = add_node();
  Node& c = add_node();
  connect(a, {&b});
  connect(b, {&a});
  connect(c, {&a});  // c lists a; a does not list c

  Bytes hello = {'h', 'i', 0, 0xff};
  ASSERT_TRUE(signal(a, b, hello));
  ASSERT_TRUE(await([&] { return !b.signals.empty(); }));
  EXPECT_EQ(b.signals[0].first, a.id->public_key());
  EXPECT_EQ(b.signals[0].second, hello);
  EXPECT_EQ(b.signal_hosts[0], "127.0.0.1") << "the relay says where it saw the sender";

  Status from_c = signal(c, a, {1});
  ASSERT_FALSE(from_c);
  EXPECT_EQ(from_c.error().code(), ErrorCode::kUnavailable);
  EXPECT_NE(from_c.error().to_string().find("peer_unavailable"), std::string::npos) << from_c.error().to_string();
  Status to_c = signal(a, c, {1});
  ASSERT_FALSE(to_c);
  EXPECT_NE(to_c.error().to_string().find("not_declared"), std::string::npos) << to_c.error().to_string();
  EXPECT_TRUE(a.signals.empty());

  // Once a declares c too, c's signal goes through.
  std::optional<Status> set;
  a.client->set_peers({b.id->public_key(), c.id->public_key()}, [&](Status s) { set = std::move(s); });
  ASSERT_TRUE(await([&] { return set.has_value(); }));
  ASSERT_TRUE(*set);
  ASSERT_TRUE(signal(c, a, {7}));
  ASSERT_TRUE(await([&] { return !a.signals.empty(); }));
  EXPECT_EQ(a.signals[0].first, c.id->public_key());

  // Signals are small: the client refuses a big one before it leaves.
  Status big = signal(a, b, Bytes(kMaxSignalBytes + 1, 1));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(relay_->metrics().signals_total, 2u);
  EXPECT_EQ(relay_->metrics().refusals_of(Reason::kNotDeclared), 1u);
  EXPECT_EQ(relay_->metrics().refusals_of(Reason::kPeerUnavailable), 1u);
}

// Reads everything from a TLS channel until the peer closes.
void read_all(std::shared_ptr<link::TlsChannel> chan, std::shared_ptr<std::vector<uint8_t>> buf, std::string* out,
              bool* done) {
  chan->async_read_some(buf->data(), buf->size(), [chan, buf, out, done](boost::system::error_code ec, size_t n) {
    out->append(reinterpret_cast<const char*>(buf->data()), n);
    if (ec) {
      *done = true;
      return;
    }
    read_all(chan, buf, out, done);
  });
}

TEST_F(RelayTest, PipeCarriesEndToEndTlsAndTheRelaySeesCiphertextOnly) {
  start();
  std::map<PublicKeyBytes, std::string> relayed;  // what the relay copied, by sending node
  relay_->set_tap([&](const PublicKeyBytes& from, ByteView bytes) {
    relayed[from].append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  });
  Node& a = add_node();
  Node& b = add_node();
  connect(a, {&b});
  connect(b, {&a});
  auto [pa, pb] = pipe_between(a, b);
  EXPECT_TRUE(pa.initiator);
  EXPECT_FALSE(pb.initiator);
  EXPECT_EQ(pa.peer, b.id->public_key());
  EXPECT_EQ(pb.peer, a.id->public_key());
  EXPECT_EQ(relay_->gauges().pipes, 1u);
  EXPECT_EQ(relay_->metrics().pipes_total, 1u);

  // The peers' own TLS session inside the pipe, keys pinned both ways, the
  // initiator as client: exactly what the peer link will run.
  auto ctx_a = link::TlsContext::create(*a.id, false).value();
  auto ctx_b = link::TlsContext::create(*b.id, true).value();
  auto tls_a = std::make_shared<link::TlsChannel>(std::move(pa.socket), ctx_a->native(), false);
  auto tls_b = std::make_shared<link::TlsChannel>(std::move(pb.socket), ctx_b->native(), true);
  PublicKeyBytes key_a = a.id->public_key(), key_b = b.id->public_key();
  link::TlsContext::set_policy(tls_a->native_handle(), [key_b](const PublicKeyBytes& k) {
    return k == key_b ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  });
  link::TlsContext::set_policy(tls_b->native_handle(), [key_a](const PublicKeyBytes& k) {
    return k == key_a ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  });
  int handshakes = 0;
  tls_a->async_handshake([&](boost::system::error_code ec) { handshakes += ec ? 100 : 1; });
  tls_b->async_handshake([&](boost::system::error_code ec) { handshakes += ec ? 100 : 1; });
  ASSERT_TRUE(await([&] { return handshakes >= 2; }));
  ASSERT_EQ(handshakes, 2);

  const std::string marker = "YONDER-RELAY-PLAINTEXT-MARKER-51f0c2";
  std::string payload;
  while (payload.size() < (1u << 20)) payload += marker + std::to_string(payload.size()) + "\n";
  std::string got_b, got_a;
  bool b_done = false, a_done = false, a_wrote = false, b_wrote = false;
  read_all(tls_b, std::make_shared<std::vector<uint8_t>>(64 * 1024), &got_b, &b_done);
  read_all(tls_a, std::make_shared<std::vector<uint8_t>>(64 * 1024), &got_a, &a_done);
  tls_a->async_write(as_bytes(payload), [&](boost::system::error_code ec, size_t) {
    ASSERT_FALSE(ec);
    tls_a->async_shutdown([&](boost::system::error_code) { a_wrote = true; });
  });
  std::string reply = marker + " back";
  tls_b->async_write(as_bytes(reply), [&](boost::system::error_code ec, size_t) {
    ASSERT_FALSE(ec);
    b_wrote = true;
  });
  ASSERT_TRUE(await([&] { return b_done && a_wrote && b_wrote && got_a.size() >= reply.size(); }));
  EXPECT_EQ(got_b, payload);
  EXPECT_EQ(got_a.substr(0, reply.size()), reply);

  // The relay copied every byte both ways and held none of the plaintext.
  const std::string& from_a = relayed[key_a];
  const std::string& from_b = relayed[key_b];
  EXPECT_GT(from_a.size(), payload.size());
  ASSERT_FALSE(from_a.empty());
  EXPECT_EQ(static_cast<uint8_t>(from_a[0]), 0x16);  // a TLS handshake record: the ClientHello
  EXPECT_EQ(from_a.find(marker), std::string::npos);
  EXPECT_EQ(from_b.find(marker), std::string::npos);
  EXPECT_EQ(from_a.find("MARKER"), std::string::npos);
  EXPECT_EQ(relay_->metrics().bytes_relayed_total, from_a.size() + from_b.size());
  tls_b->close();
  tls_a->close();
  ASSERT_TRUE(await([&] { return relay_->gauges().pipes == 0; }));
}

TEST_F(RelayTest, PipesNeedMutualPeersAndBothRequests) {
  RelayConfig c = config();
  c.registry.pipe_request_timeout = 1s;
  start(c);
  Node& a = add_node();
  Node& b = add_node();
  Node& stranger = add_node();
  connect(a, {&b, &stranger});
  connect(b, {&a});  // b does not answer pipe_wanted here
  connect(stranger, {});

  std::optional<Result<RelayPipe>> r1, r2, r3;
  a.client->open_pipe(stranger.id->public_key(), [&](Result<RelayPipe> p) { r1 = std::move(p); });
  ASSERT_TRUE(await([&] { return r1.has_value(); }));
  ASSERT_FALSE(*r1);
  EXPECT_NE(r1->error().to_string().find("peer_unavailable"), std::string::npos);
  EXPECT_TRUE(stranger.wanted.empty());  // told nothing

  a.client->open_pipe(b.id->public_key(), [&](Result<RelayPipe> p) { r2 = std::move(p); });
  ASSERT_TRUE(await([&] { return b.wanted.size() == 1; }));
  EXPECT_EQ(b.wanted[0], a.id->public_key());
  a.client->open_pipe(b.id->public_key(), [&](Result<RelayPipe> p) { r3 = std::move(p); });
  ASSERT_TRUE(await([&] { return r3.has_value(); }));
  EXPECT_NE(r3->error().to_string().find("pipe_pending"), std::string::npos);
  // b never asks: a's request times out (the relay's timer, awaited).
  ASSERT_TRUE(await([&] { return r2.has_value(); }));
  ASSERT_FALSE(*r2);
  EXPECT_NE(r2->error().to_string().find("pipe_timeout"), std::string::npos) << r2->error().to_string();
  EXPECT_EQ(relay_->gauges().pipes, 0u);
}

TEST_F(RelayTest, BandwidthLimitSlowsOnlyTheNodeOverItsBudget) {
  RelayConfig c = config();
  c.node_rate = 1 << 20;     // 1 MiB/s per node
  c.node_burst = 128 << 10;  // 128 KiB at once
  start(c);
  Node& heavy = add_node();
  Node& heavy_peer = add_node();
  Node& light = add_node();
  Node& light_peer = add_node();
  connect(heavy, {&heavy_peer});
  connect(heavy_peer, {&heavy});
  connect(light, {&light_peer});
  connect(light_peer, {&light});
  auto [h_out, h_in] = pipe_between(heavy, heavy_peer);
  auto [l_out, l_in] = pipe_between(light, light_peer);

  constexpr size_t kHeavy = 2 << 20;   // 2 MiB: well over the burst
  constexpr size_t kLight = 96 << 10;  // within the burst
  std::vector<uint8_t> heavy_data(kHeavy, 0x41), light_data(kLight, 0x42);
  std::vector<uint8_t> heavy_got(kHeavy), light_got(kLight);
  std::optional<SteadyClock::duration> heavy_took, light_took;
  auto t0 = SteadyClock::now();
  asio::async_write(h_out.socket, asio::buffer(heavy_data), [](boost::system::error_code, size_t) {});
  asio::async_write(l_out.socket, asio::buffer(light_data), [](boost::system::error_code, size_t) {});
  asio::async_read(h_in.socket, asio::buffer(heavy_got), [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, kHeavy);
    heavy_took = SteadyClock::now() - t0;
  });
  asio::async_read(l_in.socket, asio::buffer(light_got), [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, kLight);
    light_took = SteadyClock::now() - t0;
  });
  ASSERT_TRUE(await([&] { return heavy_took && light_took; }, 30s));
  double heavy_s = std::chrono::duration<double>(*heavy_took).count();
  double light_s = std::chrono::duration<double>(*light_took).count();
  // At 1 MiB/s after a 128 KiB burst, 2 MiB cannot arrive in under 1.875 s;
  // allow 15 % for clock and token rounding. The light node, sharing the
  // relay's one thread, is done long before.
  double floor_s = static_cast<double>(kHeavy - c.node_burst) / c.node_rate;
  EXPECT_GE(heavy_s, 0.85 * floor_s) << "heavy took " << heavy_s << " s";
  EXPECT_LT(heavy_s, 4 * floor_s) << "heavy took " << heavy_s << " s";
  EXPECT_LT(light_s, heavy_s / 4) << "light took " << light_s << " s, heavy " << heavy_s << " s";
  EXPECT_GT(relay_->metrics().throttled_total, 0u);
  EXPECT_EQ(heavy_got, heavy_data);
}

// The relay's total budget (a yonderd relaying on its owner's uplink):
// two nodes with no limit of their own share it, neither starves the other,
// and together they stay under it.
TEST_F(RelayTest, TotalBandwidthLimitHoldsAcrossNodesAndEachKeepsItsShare) {
  RelayConfig c = config();
  c.node_rate = 0;
  c.total_rate = 1 << 20;     // 1 MiB/s for everyone
  c.total_burst = 128 << 10;  // 128 KiB at once
  start(c);
  Node& a = add_node();
  Node& a_peer = add_node();
  Node& b = add_node();
  Node& b_peer = add_node();
  connect(a, {&a_peer});
  connect(a_peer, {&a});
  connect(b, {&b_peer});
  connect(b_peer, {&b});
  auto [a_out, a_in] = pipe_between(a, a_peer);
  auto [b_out, b_in] = pipe_between(b, b_peer);

  constexpr size_t kEach = 1 << 20;  // 1 MiB each: 2 MiB in all, well over the burst
  std::vector<uint8_t> a_data(kEach, 0x41), b_data(kEach, 0x42);
  std::vector<uint8_t> a_got(kEach), b_got(kEach);
  std::optional<SteadyClock::duration> a_took, b_took;
  auto t0 = SteadyClock::now();
  asio::async_write(a_out.socket, asio::buffer(a_data), [](boost::system::error_code, size_t) {});
  asio::async_write(b_out.socket, asio::buffer(b_data), [](boost::system::error_code, size_t) {});
  asio::async_read(a_in.socket, asio::buffer(a_got), [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, kEach);
    a_took = SteadyClock::now() - t0;
  });
  asio::async_read(b_in.socket, asio::buffer(b_got), [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, kEach);
    b_took = SteadyClock::now() - t0;
  });
  ASSERT_TRUE(await([&] { return a_took && b_took; }, 30s));
  double a_s = std::chrono::duration<double>(*a_took).count();
  double b_s = std::chrono::duration<double>(*b_took).count();
  double last_s = std::max(a_s, b_s);
  double first_s = std::min(a_s, b_s);
  // 2 MiB at 1 MiB/s after a 128 KiB burst cannot all arrive in under
  // 1.875 s (15 % allowed for clock and token rounding). Had one pipe taken
  // the whole budget, it would have been done at about half that; sharing,
  // the first is done well after.
  double floor_s = static_cast<double>(2 * kEach - c.total_burst) / c.total_rate;
  EXPECT_GE(last_s, 0.85 * floor_s) << "a took " << a_s << " s, b " << b_s << " s";
  EXPECT_GE(first_s, 0.6 * last_s) << "a took " << a_s << " s, b " << b_s << " s";
  EXPECT_GT(relay_->metrics().throttled_total, 0u);
  EXPECT_EQ(a_got, a_data);
  EXPECT_EQ(b_got, b_data);
}

// The monthly allowance: the relay starts with this month nearly used up,
// a transfer over what is left is cut, the next pipe is refused with the
// reason, and the usage it reports (for the embedder to keep) is the cap.
TEST_F(RelayTest, AtTheMonthlyCapPipesCloseAndNewOnesAreRefused) {
  RelayConfig c = config();
  const std::string month = utc_month(std::chrono::system_clock::now());
  c.monthly_bytes = 1 << 20;
  c.monthly_usage = MonthlyUsage{month, (1 << 20) - (256 << 10)};  // 256 KiB left
  std::vector<MonthlyUsage> reported;
  c.on_monthly_usage = [&](const MonthlyUsage& u) { reported.push_back(u); };
  start(c);
  Node& a = add_node();
  Node& b = add_node();
  connect(a, {&b});
  connect(b, {&a});
  auto [out, in] = pipe_between(a, b);

  std::vector<uint8_t> data(1 << 20, 0x43), got(1 << 20);
  std::optional<boost::system::error_code> read_ended;
  size_t got_n = 0;
  asio::async_write(out.socket, asio::buffer(data), [](boost::system::error_code, size_t) {});
  asio::async_read(in.socket, asio::buffer(got), [&](boost::system::error_code ec, size_t n) {
    read_ended = ec;
    got_n = n;
  });
  ASSERT_TRUE(await([&] { return read_ended.has_value(); }, 30s));
  EXPECT_TRUE(*read_ended) << "the pipe was cut before 1 MiB arrived";
  EXPECT_LE(got_n, size_t{256} << 10) << "no more than what was left passed";
  ASSERT_FALSE(reported.empty()) << "the relay reported its usage at the cap";
  EXPECT_EQ(reported.back().month, month);
  EXPECT_GE(reported.back().bytes, c.monthly_bytes);
  EXPECT_EQ(relay_->monthly_usage(), reported.back());

  std::optional<Result<RelayPipe>> next;
  b.accept_pipes = true;
  a.client->open_pipe(b.id->public_key(), [&](Result<RelayPipe> p) { next = std::move(p); });
  ASSERT_TRUE(await([&] { return next.has_value(); }));
  ASSERT_FALSE(*next);
  EXPECT_NE(next->error().to_string().find("monthly_cap_reached"), std::string::npos) << next->error().to_string();
  EXPECT_NE(next->error().to_string().find("when the month turns"), std::string::npos) << next->error().to_string();
  EXPECT_EQ(relay_->metrics().refusals_of(Reason::kMonthlyCapReached), 1u);
}

TEST_F(RelayTest, PerNodeRateOverrideLiftsTheLimitForThatNodeOnly) {
  RelayConfig c = config();
  c.node_rate = 256 << 10;  // 256 KiB/s
  c.node_burst = 64 << 10;
  Node& vip = add_node();
  Node& vip_peer = add_node();
  c.node_rate_overrides[vip.id->public_key()] = 0;
  start(c);
  connect(vip, {&vip_peer});
  connect(vip_peer, {&vip});
  EXPECT_EQ((*vip.registered)->node_rate, 0u);
  EXPECT_EQ((*vip_peer.registered)->node_rate, 256u << 10);
  auto [out, in] = pipe_between(vip, vip_peer);
  constexpr size_t kBytes = 4 << 20;  // 16 s at the default rate
  std::vector<uint8_t> data(kBytes, 7), got(kBytes);
  std::optional<SteadyClock::duration> took;
  auto t0 = SteadyClock::now();
  asio::async_write(out.socket, asio::buffer(data), [](boost::system::error_code, size_t) {});
  asio::async_read(in.socket, asio::buffer(got), [&](boost::system::error_code ec, size_t) {
    EXPECT_FALSE(ec);
    took = SteadyClock::now() - t0;
  });
  ASSERT_TRUE(await([&] { return took.has_value(); }, 30s));
  EXPECT_LT(std::chrono::duration<double>(*took).count(), 4.0);
  EXPECT_EQ(relay_->metrics().throttled_total, 0u);
}

TEST_F(RelayTest, IdleConnectionsAndPipesAreClosed) {
  RelayConfig c = config();
  c.idle_timeout = 600ms;  // six keepalive intervals: pings are never late by that much
  c.pipe_idle_timeout = 600ms;
  start(c);
  Node& a = add_node();
  Node& b = add_node();
  Node& silent = add_node();
  connect(a, {&b}, 100ms);  // pings well within the idle timeout
  connect(b, {&a}, 100ms);
  connect(silent, {}, 0ms);  // never pings
  auto [pa, pb] = pipe_between(a, b);
  uint8_t byte_a = 0, byte_b = 0;
  std::optional<boost::system::error_code> end_a, end_b;
  asio::async_read(pa.socket, asio::buffer(&byte_a, 1), [&](boost::system::error_code ec, size_t) { end_a = ec; });
  asio::async_read(pb.socket, asio::buffer(&byte_b, 1), [&](boost::system::error_code ec, size_t) { end_b = ec; });
  ASSERT_TRUE(await([&] { return silent.closed.has_value() && end_a && end_b; }));
  EXPECT_EQ(silent.closed->code(), ErrorCode::kUnavailable);
  EXPECT_NE(silent.closed->to_string().find("idle_timeout"), std::string::npos) << silent.closed->to_string();
  EXPECT_EQ(*end_a, asio::error::eof);
  EXPECT_EQ(*end_b, asio::error::eof);
  // The nodes that pinged are still there.
  EXPECT_TRUE(a.client->registered());
  EXPECT_TRUE(b.client->registered());
  EXPECT_FALSE(a.closed);
  EXPECT_EQ(relay_->metrics().refusals_of(Reason::kIdleTimeout), 2u);  // the silent node and the pipe
}

TEST_F(RelayTest, PerNodeConnectionLimit) {
  RelayConfig c = config();
  c.registry.max_connections_per_node = 1;
  start(c);
  Node& a = add_node();
  connect(a, {});
  std::optional<Result<NatReport>> probe;
  a.client->probe_nat([&](Result<NatReport> r) { probe = std::move(r); });
  ASSERT_TRUE(await([&] { return probe.has_value(); }));
  ASSERT_FALSE(*probe);
  EXPECT_EQ(probe->error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(probe->error().to_string().find("node_connection_limit"), std::string::npos) << probe->error().to_string();
  // Another node is not affected, nor is a's first connection.
  Node& b = add_node();
  connect(b, {});
  std::optional<Status> set;
  a.client->set_peers({}, [&](Status s) { set = std::move(s); });
  ASSERT_TRUE(await([&] { return set.has_value(); }));
  EXPECT_TRUE(*set);
}

TEST_F(RelayTest, StopsCleanly) {
  start();
  Node& a = add_node();
  Node& b = add_node();
  connect(a, {&b});
  connect(b, {&a});
  auto [pa, pb] = pipe_between(a, b);
  uint8_t byte = 0;
  std::optional<boost::system::error_code> pipe_end;
  asio::async_read(pa.socket, asio::buffer(&byte, 1), [&](boost::system::error_code ec, size_t) { pipe_end = ec; });
  relay_->stop();
  // Every connection ends: the nodes were told why, the pipe closed.
  ASSERT_TRUE(await([&] { return a.closed && b.closed && pipe_end && relay_->gauges().connections == 0; }));
  EXPECT_NE(a.closed->to_string().find("shutting_down"), std::string::npos) << a.closed->to_string();
  EXPECT_EQ(*pipe_end, asio::error::eof);
  // Nothing is left running: the loop runs out of work at once.
  pb.socket.close();
  pa.socket.close();
  auto t0 = SteadyClock::now();
  io_.restart();
  io_.run_for(5s);
  EXPECT_LT(SteadyClock::now() - t0, 2500ms);
  // A client cannot reach a stopped relay.
  Node& late = add_node();
  RelayClientConfig cfg;
  cfg.address = address_;
  auto cl = RelayClient::create(io_, *late.id, cfg).value();
  std::optional<Result<Registration>> r;
  cl->connect({}, [&](Result<Registration> res) { r = std::move(res); });
  ASSERT_TRUE(await([&] { return r.has_value(); }));
  EXPECT_FALSE(*r);
}

// A daemon that embeds the relay may stop its loop right after stopping
// the relay (yonderd does): the server goes away with its connections'
// goodbyes still queued, and the loop never runs again. Nothing the server
// held may outlive it: a leak here fails this binary under the sanitizers.
TEST(RelayServerLifetime, DestroyedWithItsLoopRightAfterStopItLeavesNothingBehind) {
  {
    asio::io_context io;
    Identity relay_id = Identity::generate().value();
    RelayConfig c;
    auto server = std::make_unique<RelayServer>(io, relay_id, c);
    ASSERT_TRUE(server->listen("127.0.0.1:0"));
    Identity node_id = Identity::generate().value();
    RelayClientConfig cfg;
    cfg.address = "127.0.0.1:" + std::to_string(server->local_endpoint().port());
    cfg.relay_key = server->key();
    auto client = RelayClient::create(io, node_id, cfg).value();
    std::optional<Result<Registration>> registered;
    client->connect({}, [&](Result<Registration> r) { registered = std::move(r); });
    auto deadline = SteadyClock::now() + 10s;
    while (!registered && SteadyClock::now() < deadline) io.run_one_for(20ms);
    ASSERT_TRUE(registered && *registered);
    EXPECT_EQ(server->gauges().connections, 1u);
    server->stop();   // the goodbye is queued...
    server.reset();   // ...and the server goes away before the loop runs again
    client->close();
  }  // the loop goes with its pending work
}

// A blocking HTTP GET on another thread (the loop runs in this one).
std::string http_get(tcp::endpoint ep, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(ep.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "connect failed";
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: relay\r\n\r\n";
  [[maybe_unused]] auto w = ::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST_F(RelayTest, MetricsEndpointServesCounters) {
  start();
  ASSERT_TRUE(relay_->listen_metrics("127.0.0.1:0"));
  Node& a = add_node();
  Node& b = add_node();
  connect(a, {&b});
  connect(b, {});
  ASSERT_FALSE(signal(a, b, {1}));  // b has not declared a
  auto page = std::async(std::launch::async, http_get, relay_->metrics_endpoint(), std::string("/metrics"));
  ASSERT_TRUE(await([&] { return page.wait_for(0s) == std::future_status::ready; }));
  std::string text = page.get();
  EXPECT_NE(text.find("HTTP/1.1 200"), std::string::npos) << text;
  EXPECT_NE(text.find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(text.find("yonder_relay_nodes 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("yonder_relay_registrations_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("yonder_relay_refusals_total{reason=\"peer_unavailable\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("yonder_relay_bytes_relayed_total 0\n"), std::string::npos);
  auto missing = std::async(std::launch::async, http_get, relay_->metrics_endpoint(), std::string("/other"));
  ASSERT_TRUE(await([&] { return missing.wait_for(0s) == std::future_status::ready; }));
  EXPECT_NE(missing.get().find("HTTP/1.1 404"), std::string::npos);
}

}  // namespace
}  // namespace yonder::relay
