// Two nodes' link services joined over the in-memory network
// (net/link/memory_channel.h), as a punched or relayed carrier is adopted
// in a real node: requests, the trust policy's refusals, and a deny that
// cuts what is in flight. One event loop, seeded read splits, no sockets.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "crypto/identity.h"
#include "net/link/link_service.h"
#include "net/link/memory_channel.h"

namespace yonder::link {
namespace {

// The trust decisions a node's peers store would make: who is pinned, and
// which methods its scope allows.
struct ScopePolicy final : TrustPolicy {
  KeyVerdict classify(const PublicKeyBytes& key) override {
    return pinned.count(key) != 0 ? KeyVerdict::kPinned : KeyVerdict::kReject;
  }
  Result<nlohmann::json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&, const std::string&,
                                const std::string&) override {
    return make_error(ErrorCode::kNotFound, "no share links in this simulation");
  }
  Status authorize(const PublicKeyBytes& key, const std::string& method) override {
    if (pinned.count(key) == 0) return make_error(ErrorCode::kPermissionDenied, "this node no longer knows you");
    if (allowed.count(method) == 0) return make_error(ErrorCode::kPermissionDenied, method + " is not in your scope");
    return Ok{};
  }
  void seen(const PublicKeyBytes&) override {}
  std::set<PublicKeyBytes> pinned;
  std::set<std::string> allowed;
};

struct SimNode {
  SimNode(boost::asio::io_context& io, const char* name) : id(Identity::generate().value()) {
    LinkConfig config;
    config.name = name;
    service = std::make_unique<LinkService>(io, id, policy, config);
  }
  PublicKeyBytes key() const { return id.public_key(); }
  Identity id;
  ScopePolicy policy;
  std::unique_ptr<LinkService> service;
};

// A consumer and a provider, paired, joined by one in-memory carrier.
// `consumer_dials`: which side runs the carrier's handshake as the dialer
// (on a punched path, whichever key sorts first).
struct World {
  explicit World(uint64_t seed, bool consumer_dials = true) : consumer(io, "consumer"), provider(io, "provider") {
    consumer.policy.pinned.insert(provider.key());
    provider.policy.pinned.insert(consumer.key());
    provider.policy.allowed = {"echo", "hang", "offset"};
    provider.service->add_method("echo", [](const PublicKeyBytes&, const nlohmann::json& p, RpcReply reply) {
      reply(nlohmann::json{{"echo", p}});
    });
    provider.service->add_method("hang", [this](const PublicKeyBytes&, const nlohmann::json&, RpcReply reply) {
      held = std::move(reply);  // answered never: a request in flight when the deny comes
    });
    provider.service->add_method("secret", [](const PublicKeyBytes&, const nlohmann::json&, RpcReply reply) {
      reply(nlohmann::json{{"secret", 42}});
    });
    // Reads its params as run.logs did, trusting their types.
    provider.service->add_method("offset", [](const PublicKeyBytes&, const nlohmann::json& p, RpcReply reply) {
      reply(nlohmann::json{{"offset", p.value("offset", uint64_t{0})}});
    });
    net = memory_channel_pair(io.get_executor(), seed, 1 + seed % 97);
    std::optional<Status> up_c, up_p;
    consumer.service->adopt_channel(net.a, provider.key(), consumer_dials, "punched (memory)",
                                    [&](Status s) { up_c = s; });
    provider.service->adopt_channel(net.b, consumer.key(), !consumer_dials, "punched (memory)",
                                    [&](Status s) { up_p = s; });
    run_until([&] { return up_c && up_p; });
    EXPECT_TRUE(up_c && up_c->ok()) << (up_c && !up_c->ok() ? up_c->error().to_string() : "not up");
    EXPECT_TRUE(up_p && up_p->ok()) << (up_p && !up_p->ok() ? up_p->error().to_string() : "not up");
  }
  ~World() {
    consumer.service->stop();
    provider.service->stop();
    io.poll();
  }
  template <class Done>
  void run_until(Done done) {
    for (int idle = 0; idle < 1000 && !done();) idle = io.poll() == 0 ? idle + 1 : 0;
  }
  // As run_until, for what waits on a timer (a redial's backoff).
  template <class Done>
  bool run_until_for(Done done, std::chrono::milliseconds within) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(std::chrono::milliseconds(50));
    return done();
  }
  // The consumer's established session to the provider, if any: its path.
  std::optional<std::string> consumer_path() const {
    for (const auto& s : consumer.service->sessions()) {
      if (s.established && !s.draining) return s.path;
    }
    return std::nullopt;
  }
  Result<nlohmann::json> call(const std::string& method, const nlohmann::json& params) {
    std::optional<Result<nlohmann::json>> got;
    consumer.service->call(provider.key(), {}, method, params, [&](Result<nlohmann::json> r) { got = std::move(r); });
    run_until([&] { return got.has_value(); });
    if (!got) return make_error(ErrorCode::kUnavailable, "no answer in the simulation");
    return std::move(*got);
  }

  boost::asio::io_context io;
  SimNode consumer, provider;
  MemoryPair net;
  RpcReply held;
};

TEST(LinkServiceSim, RequestsAreAnsweredWhateverTheReadsSplit) {
  for (uint64_t seed : {1u, 7u, 33u, 96u}) {
    World w(seed);
    nlohmann::json big = {{"text", std::string(20000, 'x')}, {"seed", seed}};
    auto r = w.call("echo", big);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.error().to_string();
    EXPECT_EQ((*r)["echo"], big) << "seed " << seed;
  }
}

TEST(LinkServiceSim, AMethodOutsideTheScopeIsRefusedWithTheReason) {
  World w(3);
  auto r = w.call("secret", nlohmann::json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().message().find("not in your scope"), std::string::npos) << r.error().message();
  EXPECT_TRUE(w.call("echo", 1).ok()) << "the session survives a refusal";
}

// A peer's params of the wrong type make nlohmann throw inside the handler;
// the link answers that request as malformed, and the node and the session
// go on (before, the exception left the event loop and ended yonderd).
TEST(LinkServiceSim, AHandlerThatThrowsOnTheParamsTypesIsAnsweredAsAMalformedRequest) {
  World w(5);
  auto good = w.call("offset", nlohmann::json{{"offset", 7}});
  ASSERT_TRUE(good.ok()) << good.error().to_string();
  EXPECT_EQ((*good)["offset"], 7);
  for (const nlohmann::json& bad : {nlohmann::json{{"offset", "x"}}, nlohmann::json::array({1, 2}),
                                    nlohmann::json("offset")}) {
    auto r = w.call("offset", bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument) << bad.dump();
    EXPECT_NE(r.error().message().find("malformed \"offset\" request"), std::string::npos) << r.error().message();
  }
  EXPECT_TRUE(w.call("echo", 1).ok()) << "the session survives a malformed request";
}

// What `yonder deny` does on the provider: the peer is no longer pinned and
// its sessions are closed now, so a request in flight ends with an error
// on the consumer and nothing more gets through.
TEST(LinkServiceSim, ADenyCutsTheRequestInFlightAndEveryLaterOne) {
  World w(11);
  std::optional<Result<nlohmann::json>> pending;
  w.consumer.service->call(w.provider.key(), {}, "hang", nlohmann::json::object(),
                           [&](Result<nlohmann::json> r) { pending = std::move(r); });
  w.run_until([&] { return w.held != nullptr; });
  ASSERT_TRUE(w.held != nullptr) << "the request reached the provider";
  EXPECT_FALSE(pending.has_value());

  w.provider.policy.pinned.erase(w.consumer.key());
  w.provider.service->disconnect(w.consumer.key(), "the provider removed this node's access");
  w.run_until([&] { return pending.has_value(); });
  ASSERT_TRUE(pending.has_value()) << "the cut request was answered, not left hanging";
  EXPECT_FALSE(pending->ok());
  // Nothing to dial in this world, and the provider would refuse a new
  // carrier anyway: the next request fails too.
  auto later = w.call("echo", 1);
  EXPECT_FALSE(later.ok());
}

// A kept link whose carrier this side accepted (a punched path's QUIC
// channel is dialled by one side only) is redialled when it drops, like one
// it dialled: here over a relay-like carrier, since the punched one is gone.
TEST(LinkServiceSim, AKeptLinkThisSideAcceptedIsRedialledWhenItDrops) {
  World w(5, /*consumer_dials=*/false);
  int carriers = 0;
  w.consumer.service->set_carrier_dialer(
      [&](const PublicKeyBytes& peer, const std::optional<ShareLink>&, std::function<void(Result<Carrier>)> done) {
        ++carriers;
        int fds[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        w.provider.service->accept_carrier(Carrier{fds[1], "relay via memory", false}, w.consumer.key());
        EXPECT_EQ(peer, w.provider.key());
        done(Carrier{fds[0], "relay via memory", true});
      },
      std::chrono::milliseconds(0));
  w.consumer.service->keep_connected(w.provider.key(), {});
  ASSERT_EQ(w.consumer_path().value_or("none"), "punched (memory)");
  EXPECT_EQ(carriers, 0) << "an established link is not dialled again";

  w.net.cut();
  const bool back = w.run_until_for([&] { return w.consumer_path().value_or("") == "relay via memory"; },
                                    std::chrono::seconds(10));
  ASSERT_TRUE(back) << "the consumer did not redial; its link is " << w.consumer_path().value_or("down");
  EXPECT_EQ(carriers, 1);
  auto r = w.call("echo", 7);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ((*r)["echo"], 7);
}

}  // namespace
}  // namespace yonder::link
