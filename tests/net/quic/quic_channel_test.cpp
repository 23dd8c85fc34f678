// The QUIC carrier over loopback UDP (real sockets): pinned-key handshakes
// and their refusals, bulk bytes both ways, EOF, the exporter, a LinkService
// session on top, the shared socket's other datagrams, and loss.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "crypto/identity.h"
#include "net/link/link_service.h"
#include "net/quic/quic_endpoint.h"

namespace yonder::quic {
namespace {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using boost::system::error_code;

Identity make_identity() {
  auto id = Identity::generate();
  if (!id) std::abort();
  return std::move(*id);
}

uint8_t pattern(uint64_t i, uint8_t seed) { return static_cast<uint8_t>(i * 131 + i / 4093 + seed); }

class QuicCarrier : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(QuicConfig config) {
    io_.restart();  // a poll() that ran out of work stopped the loop
    auto s = QuicEndpoint::bind(io_.get_executor(), server_id_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0),
                                config);
    auto c = QuicEndpoint::bind(io_.get_executor(), client_id_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0),
                                config);
    ASSERT_TRUE(s && c);
    server_ = *s;
    client_ = *c;
  }
  void TearDown() override {
    if (client_) client_->close();
    if (server_) server_->close();
    io_.poll();
  }

  // Runs the loop until `done` (each step waits on an event; the bound only
  // keeps a broken build from hanging the suite).
  void run_until(const std::function<bool()>& done) {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done() && std::chrono::steady_clock::now() < give_up) io_.run_one_for(std::chrono::seconds(1));
    ASSERT_TRUE(done()) << "the awaited event never came";
  }

  // Connects client -> server with the keys given; both channels on success.
  void connect_pair(std::shared_ptr<QuicChannel>* client_ch, std::shared_ptr<QuicChannel>* server_ch) {
    server_->listen([this](const PublicKeyBytes& k) { return k == client_id_.public_key(); },
                    [server_ch](std::shared_ptr<QuicChannel> ch, PublicKeyBytes) { *server_ch = std::move(ch); });
    bool done = false;
    client_->connect(server_->local_endpoint(), server_id_.public_key(), [&](Result<std::shared_ptr<QuicChannel>> r) {
      done = true;
      ASSERT_TRUE(r) << r.error().to_string();
      *client_ch = *r;
    });
    run_until([&] { return done && *server_ch != nullptr; });
    ASSERT_TRUE(*client_ch);
  }

  asio::io_context io_;
  Identity server_id_ = make_identity();
  Identity client_id_ = make_identity();
  std::shared_ptr<QuicEndpoint> server_, client_;
};

TEST_F(QuicCarrier, HandshakeWithPinnedKeysBothWays) {
  std::shared_ptr<QuicChannel> c, s;
  PublicKeyBytes seen{};
  server_->listen([this](const PublicKeyBytes& k) { return k == client_id_.public_key(); },
                  [&](std::shared_ptr<QuicChannel> ch, PublicKeyBytes key) {
                    s = std::move(ch);
                    seen = key;
                  });
  bool done = false;
  client_->connect(server_->local_endpoint(), server_id_.public_key(), [&](Result<std::shared_ptr<QuicChannel>> r) {
    done = true;
    ASSERT_TRUE(r) << r.error().to_string();
    c = *r;
  });
  run_until([&] { return done && s != nullptr; });
  ASSERT_TRUE(c);
  EXPECT_EQ(seen, client_id_.public_key());
  EXPECT_EQ(s->peer_key(), client_id_.public_key());
  EXPECT_EQ(c->peer_key(), server_id_.public_key());
  EXPECT_EQ(c->remote_endpoint(), server_->local_endpoint());
  EXPECT_EQ(c->path_string().rfind("punched quic 127.0.0.1:", 0), 0u) << c->path_string();
  EXPECT_GT(c->rtt().count(), 0);
  // The exporter: same label, same bytes on both ends.
  std::string a = link::short_auth_string(*c), b = link::short_auth_string(*s);
  EXPECT_NE(a, "unavailable");
  EXPECT_EQ(a, b);
}

// A QUIC v1 Initial as a client's first datagram looks (padded to 1200
// bytes) with destination connection id `n`: enough for the endpoint to
// take it for a new handshake; its payload is junk, so the handshake that
// follows fails.
Bytes fake_initial(uint8_t n) {
  Bytes d = {0xc0, 0x00, 0x00, 0x00, 0x01, 8, 1, 2, 3, 4, 5, 6, 7, n, 8, 9, 9, 9, 9, 9, 9, 9, 9, 0x00};
  size_t rest = 1200 - d.size() - 2;
  d.push_back(static_cast<uint8_t>(0x40 | (rest >> 8)));
  d.push_back(static_cast<uint8_t>(rest & 0xff));
  d.resize(1200, 0x5a);
  return d;
}

// A flood of new handshakes from one address is cut off before the crypto
// work each would cost; another address still gets its own budget.
TEST_F(QuicCarrier, NewHandshakesFromOneSourceAreRateLimitedBeforeCryptoWork) {
  server_->listen([](const PublicKeyBytes&) { return true; }, [](std::shared_ptr<QuicChannel>, PublicKeyBytes) {});
  udp::endpoint flooder(asio::ip::make_address("192.0.2.7"), 4444);
  for (int i = 0; i < 40; ++i) server_->inject_datagram(flooder, fake_initial(static_cast<uint8_t>(i)));
  EXPECT_EQ(server_->stats().handshakes_limited, 40u - QuicEndpoint::kHandshakeBurst);
  udp::endpoint other(asio::ip::make_address("192.0.2.8"), 4444);
  server_->inject_datagram(other, fake_initial(200));
  EXPECT_EQ(server_->stats().handshakes_limited, 40u - QuicEndpoint::kHandshakeBurst) << "another source is not limited";
}

TEST_F(QuicCarrier, ServerRefusesAnUnknownKey) {
  bool accepted = false;
  server_->listen([](const PublicKeyBytes&) { return false; },
                  [&](std::shared_ptr<QuicChannel>, PublicKeyBytes) { accepted = true; });
  std::optional<Error> error;
  client_->connect(server_->local_endpoint(), server_id_.public_key(), [&](Result<std::shared_ptr<QuicChannel>> r) {
    ASSERT_FALSE(r);
    error = r.error();
  });
  run_until([&] { return error.has_value(); });
  EXPECT_FALSE(accepted);
  EXPECT_NE(error->to_string().find("refused"), std::string::npos) << error->to_string();
}

TEST_F(QuicCarrier, ClientRefusesAServerWithAnotherKey) {
  Identity other = make_identity();
  bool accepted = false;
  server_->listen([](const PublicKeyBytes&) { return true; },
                  [&](std::shared_ptr<QuicChannel>, PublicKeyBytes) { accepted = true; });
  std::optional<Error> error;
  client_->connect(server_->local_endpoint(), other.public_key(), [&](Result<std::shared_ptr<QuicChannel>> r) {
    ASSERT_FALSE(r);
    error = r.error();
  });
  run_until([&] { return error.has_value(); });
  EXPECT_FALSE(accepted);
  EXPECT_NE(error->to_string().find("answered with a different key (a man in the middle?)"), std::string::npos)
      << error->to_string();
}

TEST_F(QuicCarrier, ConnectToAClosedPortTimesOutClearly) {
  QuicConfig fast;
  fast.connect_timeout = std::chrono::milliseconds(300);
  client_->close();
  auto c = QuicEndpoint::bind(io_.get_executor(), client_id_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0),
                              fast);
  ASSERT_TRUE(c);
  client_ = *c;
  udp::socket closed(io_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto target = closed.local_endpoint();
  closed.close();
  std::optional<Error> error;
  client_->connect(target, server_id_.public_key(), [&](Result<std::shared_ptr<QuicChannel>> r) {
    ASSERT_FALSE(r);
    error = r.error();
  });
  run_until([&] { return error.has_value(); });
  std::string want = "no QUIC answer from 127.0.0.1:" + std::to_string(target.port()) +
                     " within 0.3 s: the path is blocked";
  EXPECT_NE(error->to_string().find(want), std::string::npos) << error->to_string();
}

TEST_F(QuicCarrier, AdoptsABoundSocket) {
  client_->close();
  udp::socket socket(io_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto bound = socket.local_endpoint();
  auto c = QuicEndpoint::adopt(std::move(socket), client_id_);
  ASSERT_TRUE(c) << c.error().to_string();
  client_ = *c;
  EXPECT_EQ(client_->local_endpoint(), bound);
  std::shared_ptr<QuicChannel> ch, s;
  connect_pair(&ch, &s);
  ASSERT_TRUE(ch && s);
  EXPECT_EQ(s->remote_endpoint(), bound);
}

// A peer that vanishes without a word (its socket gone): keepalive PINGs go
// unanswered and the idle timeout ends the channel; the reader hears it.
TEST_F(QuicCarrier, ADeadPathIsNoticed) {
  TearDown();
  QuicConfig quick;
  quick.keepalive = std::chrono::milliseconds(50);
  quick.idle_timeout = std::chrono::milliseconds(300);
  start(quick);
  std::shared_ptr<QuicChannel> c, s;
  connect_pair(&c, &s);
  ASSERT_TRUE(c && s);
  std::optional<error_code> result;
  std::array<uint8_t, 16> buf{};
  c->async_read_some(buf.data(), buf.size(), [&](error_code ec, size_t) { result = ec; });
  server_.reset();  // its destructor sends nothing: the path is simply dead
  s.reset();
  run_until([&] { return result.has_value(); });
  EXPECT_EQ(*result, asio::error::timed_out) << result->message();
  EXPECT_FALSE(c->is_open());
}

// Streams `total` patterned bytes out of `ch` while reading and checking the
// peer's, until EOF.
struct Pump {
  std::shared_ptr<QuicChannel> ch;
  uint64_t total = 0;
  uint8_t out_seed = 0, in_seed = 0;
  uint64_t sent = 0, received = 0;
  bool mismatch = false, eof = false, shut = false, shutting = false;
  std::string error;
  Bytes wbuf = Bytes(256 * 1024);
  std::array<uint8_t, 64 * 1024> rbuf{};

  void start() {
    write();
    read();
  }
  // The orderly end once both directions are complete: the whole channel
  // closes (as TLS's close_notify does), so the first side to finish waits
  // for the peer's bytes too.
  void maybe_shutdown() {
    if (sent != total || received != total || shutting) return;
    shutting = true;
    ch->async_shutdown([this](error_code ec) {
      if (ec) error = "shutdown: " + ec.message();
      shut = true;
    });
  }
  void write() {
    if (sent == total) return maybe_shutdown();
    size_t n = static_cast<size_t>(std::min<uint64_t>(wbuf.size(), total - sent));
    for (size_t i = 0; i < n; ++i) wbuf[i] = pattern(sent + i, out_seed);
    ch->async_write(ByteView(wbuf.data(), n), [this](error_code ec, size_t k) {
      if (ec) {
        error = "write: " + ec.message();
        return;
      }
      sent += k;
      write();
    });
  }
  void read() {
    ch->async_read_some(rbuf.data(), rbuf.size(), [this](error_code ec, size_t n) {
      if (ec == asio::error::eof) {
        eof = true;
        if (!shutting) {  // the peer ended first: our side of the orderly end
          shutting = true;
          ch->async_shutdown([this](error_code sec) {
            if (sec) error = "shutdown after eof: " + sec.message();
            shut = true;
          });
        }
        return;
      }
      if (ec) {
        error = "read: " + ec.message();
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        if (rbuf[i] != pattern(received + i, in_seed)) mismatch = true;
      }
      received += n;
      maybe_shutdown();
      read();
    });
  }
};

void exchange(QuicCarrier* t, std::shared_ptr<QuicChannel> c, std::shared_ptr<QuicChannel> s, uint64_t total,
              const std::function<void(const std::function<bool()>&)>& run_until) {
  Pump a, b;
  a.ch = c;
  a.total = total;
  a.out_seed = 1;
  a.in_seed = 2;
  b.ch = s;
  b.total = total;
  b.out_seed = 2;
  b.in_seed = 1;
  a.start();
  b.start();
  run_until([&] { return (a.eof && b.eof && a.shut && b.shut) || !a.error.empty() || !b.error.empty(); });
  (void)t;
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(a.received, total);
  EXPECT_EQ(b.received, total);
  EXPECT_FALSE(a.mismatch);
  EXPECT_FALSE(b.mismatch);
  EXPECT_TRUE(a.eof && b.eof);
}

TEST_F(QuicCarrier, BulkBothWaysAtOnceThenEof) {
  std::shared_ptr<QuicChannel> c, s;
  connect_pair(&c, &s);
  ASSERT_TRUE(c && s);
  exchange(this, c, s, 48ull * 1024 * 1024, [this](const std::function<bool()>& f) { run_until(f); });
}

// With GRO the kernel hands over runs of packets in one buffer, which the
// endpoint splits at the size it reports; the bytes check in exchange()
// fails if a split is off by one byte. Without it, one packet per call.
TEST_F(QuicCarrier, RunsOfPacketsArriveInOneCallWithGroAndOnePerCallWithout) {
  for (bool gso : {true, false}) {
    SCOPED_TRACE(gso ? "GSO and GRO asked for" : "GSO and GRO off");
    TearDown();
    QuicConfig config;
    config.gso = gso;
    start(config);
    std::shared_ptr<QuicChannel> c, s;
    connect_pair(&c, &s);
    ASSERT_TRUE(c && s);
    exchange(this, c, s, 8ull * 1024 * 1024, [this](const std::function<bool()>& f) { run_until(f); });
    const auto& in = server_->stats();
    ASSERT_GT(in.datagrams_in, 1000u);
    if (!gso) {
      EXPECT_FALSE(server_->gro_enabled());
      EXPECT_EQ(in.batches_in, in.datagrams_in + in.other_in);
    } else if (server_->gro_enabled() && client_->gso_enabled()) {
      EXPECT_LT(in.batches_in * 4, in.datagrams_in) << "GRO coalesced fewer than 4 packets per call";
    } else {
      GTEST_SKIP() << "this kernel offers no UDP GSO or GRO";
    }
  }
}

TEST_F(QuicCarrier, OtherDatagramsShareTheSocketAndLossIsRecovered) {
  TearDown();
  QuicConfig lossy;
  lossy.drop_every_nth_received = 10;
  start(lossy);
  std::vector<std::pair<udp::endpoint, Bytes>> others;
  server_->on_other_datagram([&](const udp::endpoint& from, ByteView data) {
    others.emplace_back(from, Bytes(data.begin(), data.end()));
  });
  std::shared_ptr<QuicChannel> c, s;
  connect_pair(&c, &s);
  ASSERT_TRUE(c && s);
  // A STUN-like datagram (first byte 0x00) and a low-TTL probe through the
  // client's QUIC socket, and one from a stranger, while the link runs.
  Bytes stun = {0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42};
  Bytes probe = {0x3f, 'p', 'u', 'n', 'c', 'h'};
  ASSERT_TRUE(client_->send_to(server_->local_endpoint(), stun));
  ASSERT_TRUE(client_->send_to(server_->local_endpoint(), probe, 2));
  udp::socket stranger(io_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  stranger.send_to(asio::buffer(probe), server_->local_endpoint());
  exchange(this, c, s, 4ull * 1024 * 1024, [this](const std::function<bool()>& f) { run_until(f); });
  run_until([&] { return others.size() == 3; });
  EXPECT_EQ(others[0].first, client_->local_endpoint());
  EXPECT_EQ(others[0].second, stun);
  EXPECT_EQ(others[1].second, probe);
  EXPECT_EQ(others[2].first, stranger.local_endpoint());
  EXPECT_GT(server_->stats().dropped_in, 0u);
  EXPECT_GT(client_->stats().dropped_in, 0u);
}

// A LinkService session runs over the QUIC channel unchanged: a request
// and its answer travel through the Mux on stream 0.
class PinAll final : public link::TrustPolicy {
 public:
  link::KeyVerdict classify(const PublicKeyBytes&) override { return link::KeyVerdict::kPinned; }
  Result<nlohmann::json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&,
                                const std::string&, const std::string&) override {
    return make_error(ErrorCode::kNotFound, "no links here");
  }
  Status authorize(const PublicKeyBytes&, const std::string&) override { return ok_status(); }
  void seen(const PublicKeyBytes&) override {}
};

TEST_F(QuicCarrier, LinkSessionRunsOverQuic) {
  std::shared_ptr<QuicChannel> c, s;
  connect_pair(&c, &s);
  ASSERT_TRUE(c && s);
  PinAll policy;
  link::LinkService provider(io_, server_id_, policy, link::LinkConfig{.name = "provider"});
  link::LinkService consumer(io_, client_id_, policy, link::LinkConfig{.name = "consumer"});
  provider.add_method("t.echo", [](const PublicKeyBytes&, const nlohmann::json& params, link::RpcReply reply) {
    reply(nlohmann::json{{"echo", params}});
  });
  std::optional<Status> up_c, up_s;
  consumer.adopt_channel(c, server_id_.public_key(), true, c->path_string(), [&](Status st) { up_c = st; });
  provider.adopt_channel(s, client_id_.public_key(), false, s->path_string(), [&](Status st) { up_s = st; });
  run_until([&] { return up_c && up_s; });
  ASSERT_TRUE(*up_c) << up_c->error().to_string();
  ASSERT_TRUE(*up_s) << up_s->error().to_string();
  std::optional<Result<nlohmann::json>> answer;
  consumer.call(server_id_.public_key(), {}, "t.echo", {{"x", 42}}, [&](Result<nlohmann::json> r) { answer = r; });
  run_until([&] { return answer.has_value(); });
  ASSERT_TRUE(*answer) << answer->error().to_string();
  EXPECT_EQ(**answer, nlohmann::json({{"echo", {{"x", 42}}}}));
  auto sessions = consumer.sessions();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].path.rfind("punched quic", 0), 0u);
  consumer.stop();
  provider.stop();
  io_.poll();
}

}  // namespace
}  // namespace yonder::quic
