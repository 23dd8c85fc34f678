// Tunnel streams between two LinkServices over loopback TLS: the answer,
// many windows of bytes both ways with a slow reader (back-pressure),
// half-close in each direction, refusals and resets.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "crypto/identity.h"
#include "net/link/link_service.h"

namespace yonder::link {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

class PinAll final : public TrustPolicy {
 public:
  KeyVerdict classify(const PublicKeyBytes&) override { return KeyVerdict::kPinned; }
  Result<json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&, const std::string&,
                      const std::string&) override {
    return make_error(ErrorCode::kNotFound, "no links here");
  }
  Status authorize(const PublicKeyBytes&, const std::string& method) override {
    if (method.rfind("denied.", 0) == 0) return make_error(ErrorCode::kPermissionDenied, "not in your scope");
    return ok_status();
  }
  void seen(const PublicKeyBytes&) override {}
};

// Echoes every byte, one chunk at a time (the next read only after the
// write was taken), and half-closes after the caller did.
void echo(Tunnel* t) {
  Tunnel::Handlers h;
  h.data = [t](Bytes b) {
    if (t->write(b)) t->resume();
  };
  h.drained = [t] { t->resume(); };
  h.eof = [t] { t->close(); };
  t->start(std::move(h));
}

class LinkTunnel : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Identity::generate();
    auto b = Identity::generate();
    ASSERT_TRUE(a && b);
    provider_id_ = std::make_unique<Identity>(std::move(*a));
    consumer_id_ = std::make_unique<Identity>(std::move(*b));
    provider_ = std::make_unique<LinkService>(io_, *provider_id_, policy_, LinkConfig{.name = "provider"});
    consumer_ = std::make_unique<LinkService>(io_, *consumer_id_, policy_, LinkConfig{.name = "consumer"});
    ASSERT_TRUE(provider_->listen("127.0.0.1:0"));
    addresses_ = {"127.0.0.1:" + std::to_string(provider_->port())};
  }
  void TearDown() override {
    held_.clear();
    consumer_->stop();
    provider_->stop();
    io_.run_for(std::chrono::milliseconds(100));
  }

  void open(const std::string& method, json params, std::function<void(Result<TunnelOpened>)> done) {
    consumer_->open_tunnel(provider_id_->public_key(), addresses_, method, std::move(params), std::move(done));
  }

  asio::io_context io_;
  PinAll policy_;
  std::unique_ptr<Identity> provider_id_, consumer_id_;
  std::unique_ptr<LinkService> provider_, consumer_;
  std::vector<std::string> addresses_;
  std::vector<std::shared_ptr<Tunnel>> held_;  // the provider's ends
};

TEST_F(LinkTunnel, EchoesManyWindowsWithASlowReaderAndHalfCloses) {
  provider_->add_tunnel_method("t.echo", [this](const PublicKeyBytes&, const json& params, TunnelAccept accept) {
    auto t = accept(json{{"hello", params.value("x", 0)}});
    ASSERT_TRUE(t);
    held_.push_back(t);
    echo(t.get());
  });
  constexpr size_t kTotal = 3 * 1024 * 1024 + 17;  // a dozen windows
  Bytes sent(kTotal);
  for (size_t i = 0; i < kTotal; ++i) sent[i] = static_cast<uint8_t>(i * 7 + i / 251);
  Bytes got;
  bool eof = false, ended = false;
  json answer;
  std::shared_ptr<Tunnel> tunnel;
  size_t offset = 0;
  std::function<void()> pump = [&] {
    while (offset < kTotal) {
      size_t n = std::min<size_t>(64 * 1024, kTotal - offset);
      ByteView chunk(sent.data() + offset, n);
      offset += n;
      if (!tunnel->write(chunk)) return;  // drained() calls pump again
    }
    tunnel->close();
  };
  open("t.echo", {{"x", 7}}, [&](Result<TunnelOpened> r) {
    ASSERT_TRUE(r) << r.error().message();
    answer = r->result;
    tunnel = r->tunnel;
    Tunnel::Handlers h;
    h.data = [&](Bytes b) {
      got.insert(got.end(), b.begin(), b.end());
      // A slow reader: resume later, from the loop.
      asio::post(io_, [&] {
        if (tunnel) tunnel->resume();
      });
    };
    h.drained = [&] { pump(); };
    h.eof = [&] {
      eof = true;
      io_.stop();
    };
    h.ended = [&](const std::string& why) {
      ended = true;
      ADD_FAILURE() << why;
      io_.stop();
    };
    tunnel->start(std::move(h));
    pump();
  });
  io_.run_for(std::chrono::seconds(20));
  EXPECT_EQ(answer, json({{"hello", 7}}));
  EXPECT_TRUE(eof);
  EXPECT_FALSE(ended);
  ASSERT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent);
  tunnel.reset();
}

TEST_F(LinkTunnel, RefusalsCarryTheReason) {
  provider_->add_tunnel_method("t.no", [](const PublicKeyBytes&, const json&, TunnelAccept accept) {
    EXPECT_EQ(accept(make_error(ErrorCode::kNotFound, "no job 12 of yours")), nullptr);
  });
  std::vector<std::pair<ErrorCode, std::string>> errors;
  auto collect = [&](Result<TunnelOpened> r) {
    ASSERT_FALSE(r);
    errors.emplace_back(r.error().code(), r.error().message());
    if (errors.size() == 3) io_.stop();
  };
  open("t.no", {}, collect);
  open("denied.x", {}, collect);
  open("t.missing", {}, collect);
  io_.run_for(std::chrono::seconds(10));
  ASSERT_EQ(errors.size(), 3u);
  auto find = [&](ErrorCode code) {
    for (const auto& [c, m] : errors) {
      if (c == code) return m;
    }
    return std::string("(none)");
  };
  EXPECT_NE(find(ErrorCode::kInvalidArgument).find("t.missing"), std::string::npos);
  EXPECT_EQ(find(ErrorCode::kPermissionDenied), "not in your scope");
  EXPECT_EQ(find(ErrorCode::kNotFound), "no job 12 of yours");
}

TEST_F(LinkTunnel, AResetReachesTheOtherEndWithItsReason) {
  provider_->add_tunnel_method("t.reset", [this](const PublicKeyBytes&, const json&, TunnelAccept accept) {
    auto t = accept(json::object());
    ASSERT_TRUE(t);
    held_.push_back(t);
    Tunnel::Handlers h;
    h.data = [raw = t.get()](Bytes) { raw->reset("connection refused"); };
    t->start(std::move(h));
  });
  std::string why;
  std::shared_ptr<Tunnel> tunnel;
  open("t.reset", {}, [&](Result<TunnelOpened> r) {
    ASSERT_TRUE(r);
    tunnel = r->tunnel;
    Tunnel::Handlers h;
    h.ended = [&](const std::string& reason) {
      why = reason;
      io_.stop();
    };
    tunnel->start(std::move(h));
    const Bytes ping = {'p', 'i', 'n', 'g'};
    EXPECT_TRUE(tunnel->write(ping));
  });
  io_.run_for(std::chrono::seconds(10));
  EXPECT_NE(why.find("connection refused"), std::string::npos) << why;
}

// A new session knows its round-trip time at once, not only after the
// first keepalive: here keepalives would come after 20 minutes.
TEST(LinkSession, MeasuresItsRoundTripAtConnect) {
  asio::io_context io;
  PinAll policy;
  auto a = Identity::generate();
  auto b = Identity::generate();
  ASSERT_TRUE(a && b);
  LinkConfig quiet{.name = "provider", .dead_after = std::chrono::hours(1)};
  LinkService provider(io, *a, policy, quiet);
  quiet.name = "consumer";
  LinkService consumer(io, *b, policy, quiet);
  ASSERT_TRUE(provider.listen("127.0.0.1:0"));
  provider.add_method("t.nothing", [](const PublicKeyBytes&, const json&, RpcReply reply) { reply(json::object()); });
  bool answered = false;
  consumer.call(a->public_key(), {"127.0.0.1:" + std::to_string(provider.port())}, "t.nothing", json::object(),
                [&](Result<json> r) { answered = r.ok(); });
  auto measured = [&] {
    auto s = consumer.sessions();
    auto p = provider.sessions();
    return answered && s.size() == 1 && s[0].rtt.has_value() && p.size() == 1 && p[0].rtt.has_value();
  };
  asio::steady_timer check(io);
  std::function<void()> poll = [&] {
    if (measured()) return io.stop();
    check.expires_after(std::chrono::milliseconds(10));
    check.async_wait([&](boost::system::error_code) { poll(); });
  };
  poll();
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(answered);
  ASSERT_TRUE(measured()) << "no RTT on a new session before its first keepalive";
  EXPECT_GT(consumer.sessions()[0].rtt->count(), 0);
  consumer.stop();
  provider.stop();
  io.restart();
  io.run_for(std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace yonder::link
