// The relay's pure parts: token bucket, addresses and NAT verdicts, the wire
// codec and its bounds, the registry's decisions, the metrics page.
#include <gtest/gtest.h>

#include <set>

#include "crypto/identity.h"
#include "relay/metrics.h"
#include "relay/monthly_allowance.h"
#include "relay/path_hint.h"
#include "relay/protocol.h"
#include "relay/registry.h"
#include "relay/token_bucket.h"

namespace yonder::relay {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

PublicKeyBytes key(uint8_t n) {
  PublicKeyBytes k{};
  k.fill(n);
  return k;
}

// --- the monthly allowance

TEST(MonthlyAllowance, ClosesAtTheCapAndOpensAgainWhenTheMonthTurns) {
  MonthlyAllowance a(1000, MonthlyUsage{"2026-11", 900});
  EXPECT_EQ(a.used("2026-11"), 900u);
  EXPECT_TRUE(a.open("2026-11"));
  a.charge(99, "2026-11");
  EXPECT_TRUE(a.open("2026-11"));
  a.charge(1, "2026-11");
  EXPECT_FALSE(a.open("2026-11")) << "1000 of 1000 carried";
  EXPECT_TRUE(a.open("2026-12")) << "a new month has nothing carried";
  a.charge(10, "2026-12");
  EXPECT_EQ(a.usage(), (MonthlyUsage{"2026-12", 10}));
  EXPECT_EQ(a.used("2026-11"), 0u) << "only the month last charged is kept";
}

TEST(MonthlyAllowance, WithoutACapItCountsAndStaysOpen) {
  MonthlyAllowance a(0, {});
  a.charge(UINT64_MAX - 1, "2026-12");
  a.charge(10, "2026-12");
  EXPECT_EQ(a.used("2026-12"), UINT64_MAX) << "the count saturates";
  EXPECT_TRUE(a.open("2026-12"));
}

TEST(MonthlyAllowance, MonthsAreUtc) {
  using namespace std::chrono;
  auto t = sys_days{year{2026} / 12 / 31} + hours{23} + minutes{59};
  EXPECT_EQ(utc_month(t), "2026-12");
  EXPECT_EQ(utc_month(t + minutes{1}), "2027-01");
  EXPECT_EQ(utc_month(sys_days{year{1999} / 3 / 1}), "1999-03");
}

TEST(MonthlyUsageRecord, RoundTripsAndRefusesDamagedRecordsNamingTheField) {
  MonthlyUsage u{"2026-12", 123456789012ull};
  auto back = decode_monthly_usage(encode_monthly_usage(u));
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, u);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"bytes": 1})", "\"month\""},
      {R"({"month": "2026-13", "bytes": 1})", "\"month\""},
      {R"({"month": "26-12", "bytes": 1})", "\"month\""},
      {R"({"month": "2026-12", "bytes": -1})", "\"bytes\""},
      {R"({"month": "2026-12", "bytes": "1"})", "\"bytes\""},
      {R"({"month": "2026-12"})", "\"bytes\""},
      {std::string(kMaxUsageText + 1, ' '), "over"},
  };
  for (const auto& [text, names] : bad) {
    auto r = decode_monthly_usage(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code(), ErrorCode::kDataLoss) << text;
    EXPECT_NE(r.error().message().find(names), std::string::npos) << text << ": " << r.error().message();
    EXPECT_NE(r.error().message().find("usage record is damaged"), std::string::npos) << r.error().message();
  }
}

// --- token bucket

TEST(TokenBucket, UnlimitedNeverWaits) {
  MonoTime t0{};
  TokenBucket b(0, 10, t0);
  EXPECT_TRUE(b.unlimited());
  b.consume(1 << 30);
  EXPECT_GT(b.available(t0), uint64_t{1} << 40);
  EXPECT_EQ(b.wait_for(1 << 20, t0), 0ns);
}

TEST(TokenBucket, BurstThenRateWithDebt) {
  MonoTime t0{};
  TokenBucket b(1000, 500, t0);  // 1000/s, burst 500
  EXPECT_EQ(b.available(t0), 500u);
  b.consume(700);  // two readers took more than there was: debt of 200
  EXPECT_EQ(b.available(t0), 0u);
  EXPECT_EQ(b.wait_for(100, t0), 300ms);  // 200 debt + 100 wanted at 1000/s
  EXPECT_EQ(b.available(t0 + 300ms), 100u);
  EXPECT_FALSE(b.full(t0 + 300ms));
  EXPECT_EQ(b.available(t0 + 10s), 500u);  // never above the burst
  EXPECT_TRUE(b.full(t0 + 10s));
  EXPECT_EQ(b.wait_for(10'000, t0 + 10s), 0ns);  // asks are capped at the burst
}

// --- addresses and NAT

TEST(NetAddressText, ParsesCanonicalisesAndRefuses) {
  auto v4 = parse_net_address("192.0.2.7:4242");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->ip, "192.0.2.7");
  EXPECT_EQ(v4->port, 4242);
  EXPECT_EQ(v4->to_string(), "192.0.2.7:4242");
  auto v6 = parse_net_address("[2001:DB8:0::1]:7");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->to_string(), "[2001:db8::1]:7");
  auto mapped = parse_net_address("[::ffff:198.51.100.1]:9");
  ASSERT_TRUE(mapped);
  EXPECT_EQ(mapped->to_string(), "198.51.100.1:9");
  for (const char* bad : {"", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "host.example:80", "::1:80",
                          "[::1]80", "1.2.3.4:8x", "999.1.1.1:1"}) {
    EXPECT_FALSE(parse_net_address(bad)) << bad;
  }
  EXPECT_FALSE(parse_net_address(std::string(200, '1') + ":1"));
}

TEST(NatVerdicts, ClassifyAndCombine) {
  NetAddress pub{"203.0.113.5", 40000};
  EXPECT_EQ(classify_mapping(pub, std::nullopt), Mapping::kUnknown);
  EXPECT_EQ(classify_mapping(pub, NetAddress{"203.0.113.5", 40000}), Mapping::kNone);
  EXPECT_EQ(classify_mapping(pub, NetAddress{"10.0.0.2", 40000}), Mapping::kPortPreserving);
  EXPECT_EQ(classify_mapping(pub, NetAddress{"10.0.0.2", 51000}), Mapping::kPortChanging);
  EXPECT_EQ(combine_mappings({}), NatVerdict::kUnknown);
  EXPECT_EQ(combine_mappings({Mapping::kNone, Mapping::kNone}), NatVerdict::kNone);
  EXPECT_EQ(combine_mappings({Mapping::kPortPreserving, Mapping::kNone}), NatVerdict::kPortPreserving);
  EXPECT_EQ(combine_mappings({Mapping::kPortPreserving, Mapping::kPortChanging}), NatVerdict::kSymmetric);
}

// --- wire codec

TEST(RelayProtocol, ClientMessagesRoundTrip) {
  Register reg{key(1), {key(3), key(2), key(3)}, {}, NetAddress{"10.0.0.2", 5000}, true};
  auto r = decode_client_message(to_json(ClientMessage(reg)));
  ASSERT_TRUE(r) << r.error().message();
  auto& got = std::get<Register>(*r);
  EXPECT_EQ(got.node, key(1));
  EXPECT_EQ(got.peers, (std::vector<PublicKeyBytes>{key(2), key(3)}));  // sorted, duplicates gone
  EXPECT_EQ(got.local_addr, reg.local_addr);
  EXPECT_TRUE(got.probe);

  Bytes data = {0, 1, 2, 255};
  auto s = decode_client_message(to_json(ClientMessage(SendSignal{7, key(9), data})));
  ASSERT_TRUE(s);
  EXPECT_EQ(std::get<SendSignal>(*s).id, 7u);
  EXPECT_EQ(std::get<SendSignal>(*s).to, key(9));
  EXPECT_EQ(std::get<SendSignal>(*s).data, data);
  auto p = decode_client_message(to_json(ClientMessage(RequestPipe{8, key(4), std::nullopt})));
  ASSERT_TRUE(p);
  EXPECT_EQ(std::get<RequestPipe>(*p).to, key(4));
  ASSERT_TRUE(decode_client_message(to_json(ClientMessage(Ping{9}))));
  ASSERT_TRUE(decode_client_message(to_json(ClientMessage(SetPeers{10, {key(5)}, {}}))));

  // Rendezvous tokens: on register, peers, pipe and pipe_wanted.
  Rendezvous token{};
  token[0] = 0xab;
  token[31] = 0x01;
  Register with{key(1), {}, {token, token}, std::nullopt, false};
  auto w = decode_client_message(to_json(ClientMessage(with)));
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(std::get<Register>(*w).rendezvous, (std::vector<Rendezvous>{token}));
  auto sp = decode_client_message(to_json(ClientMessage(SetPeers{11, {}, {token}})));
  ASSERT_TRUE(sp);
  EXPECT_EQ(std::get<SetPeers>(*sp).rendezvous.size(), 1u);
  auto rp = decode_client_message(to_json(ClientMessage(RequestPipe{12, key(4), token})));
  ASSERT_TRUE(rp);
  EXPECT_EQ(std::get<RequestPipe>(*rp).rendezvous, token);
  auto pw = decode_relay_message(to_json(RelayMessage(PipeWanted{key(2), token})));
  ASSERT_TRUE(pw);
  EXPECT_EQ(std::get<PipeWanted>(*pw).rendezvous, token);
  auto plain = decode_relay_message(to_json(RelayMessage(PipeWanted{key(2), std::nullopt})));
  ASSERT_TRUE(plain);
  EXPECT_FALSE(std::get<PipeWanted>(*plain).rendezvous.has_value());
  // Malformed or too many tokens are refused.
  nlohmann::json bad = to_json(ClientMessage(RequestPipe{13, key(4), token}));
  bad["rendezvous"] = "AB";
  EXPECT_FALSE(decode_client_message(bad));
  bad["rendezvous"] = std::string(64, 'G');
  EXPECT_FALSE(decode_client_message(bad));
  nlohmann::json many = to_json(ClientMessage(SetPeers{14, {}, {}}));
  many["rendezvous"] = nlohmann::json::array();
  for (size_t i = 0; i <= kMaxRendezvous; ++i) many["rendezvous"].push_back(std::string(64, 'a'));
  EXPECT_FALSE(decode_client_message(many));
}

TEST(RelayProtocol, RelayMessagesRoundTrip) {
  NatReport nat{NetAddress{"198.51.100.4", 61000}, Mapping::kPortChanging, NatVerdict::kSymmetric, 2};
  auto r = decode_relay_message(to_json(RelayMessage(Registered{key(1), nat, 1000, 4096, 90000})));
  ASSERT_TRUE(r) << r.error().message();
  auto& reg = std::get<Registered>(*r);
  EXPECT_EQ(reg.nat.observed, nat.observed);
  EXPECT_EQ(reg.nat.mapping, Mapping::kPortChanging);
  EXPECT_EQ(reg.nat.nat, NatVerdict::kSymmetric);
  EXPECT_EQ(reg.nat.samples, 2u);
  EXPECT_EQ(reg.node_rate, 1000u);
  Ticket t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(i * 37);
  auto pr = decode_relay_message(to_json(RelayMessage(PipeReady{3, key(2), t, true, 10000})));
  ASSERT_TRUE(pr);
  EXPECT_EQ(std::get<PipeReady>(*pr).ticket, t);
  EXPECT_TRUE(std::get<PipeReady>(*pr).initiator);
  auto e = decode_relay_message(to_json(RelayMessage(ErrorReply{4, Reason::kNotDeclared, "add it"})));
  ASSERT_TRUE(e);
  EXPECT_EQ(std::get<ErrorReply>(*e).reason, Reason::kNotDeclared);
  EXPECT_EQ(std::get<ErrorReply>(*e).id, 4u);
  auto closing = decode_relay_message(to_json(RelayMessage(ErrorReply{std::nullopt, Reason::kShuttingDown, "bye"})));
  ASSERT_TRUE(closing);
  EXPECT_FALSE(std::get<ErrorReply>(*closing).id);
  // A reason from a newer relay still refuses, with its words.
  auto future = decode_relay_message(json{{"type", "error"}, {"id", 1}, {"code", "new_thing"}, {"message", "m"}});
  ASSERT_TRUE(future);
  EXPECT_EQ(std::get<ErrorReply>(*future).message, "m");
}

TEST(RelayProtocol, ASignalSaysWhereTheRelaySawItsSenderAndOnlyAsAnIp) {
  auto s = decode_relay_message(to_json(RelayMessage(IncomingSignal{key(2), Bytes{1, 2}, "203.0.113.2"})));
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(std::get<IncomingSignal>(*s).from_host, "203.0.113.2");
  auto older = decode_relay_message(to_json(RelayMessage(IncomingSignal{key(2), Bytes{1}, ""})));
  ASSERT_TRUE(older);
  EXPECT_EQ(std::get<IncomingSignal>(*older).from_host, "");
  json named = to_json(RelayMessage(IncomingSignal{key(2), Bytes{1}, "203.0.113.2"}));
  named["from_host"] = "evil.example";
  EXPECT_FALSE(decode_relay_message(named)) << "a name would be resolved by someone later: only IPs";
}

TEST(PathHint, RoundTripsAndRefusesWhatIsNotAnEndpoint) {
  auto h = decode_path_hint(encode_path_hint(PathHint{std::string("203.0.113.2:7850")}));
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->mapped, "203.0.113.2:7850");
  auto none = decode_path_hint(encode_path_hint(PathHint{}));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->mapped.has_value());
  for (std::string bad : {R"({"v":1,"mapped":"203.0.113.2"})", R"({"v":1,"mapped":"203.0.113.2:0"})",
                          R"({"v":1,"mapped":"203.0.113.2:65536"})", R"({"v":1,"mapped":"example.org:80"})",
                          R"({"v":1,"mapped":"[::1]:80"})", R"({"v":1,"mapped":5})", R"({"v":2})", "[]", "{",
                          R"({"v":1,"mapped":"1.2.3.4:80x"})"}) {
    EXPECT_FALSE(decode_path_hint(as_bytes(bad))) << bad;
  }
  EXPECT_FALSE(decode_path_hint(Bytes(kMaxSignalBytes + 1, ' ')));
}

// A paired peer's hint must not make this node probe its own host or LAN.
TEST(PathHint, AHintToLoopbackOrAnUnadvertisedAddressIsRefused) {
  HintDialContext ctx{{"192.168.1.10", "198.18.0.9"}, {"10.0.0.5", "198.18.0.7"}, {"203.0.113.2"}};
  for (std::string bad : {"127.0.0.1:22", "127.8.9.1:6379", "0.0.0.0:80", "169.254.169.254:80", "224.0.0.251:5353",
                          "255.255.255.255:9", "10.0.0.5:7850", "198.18.0.7:7850", "192.168.1.1:80", "10.1.2.3:22",
                          "172.16.0.1:443", "100.64.0.1:80",
                          // a third party's public host: neither advertised nor where the peer was seen
                          "93.184.216.34:443", "203.0.113.3:7850"}) {
    auto st = check_hint_target(bad, ctx);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied) << bad;
    EXPECT_NE(st.error().message().find(bad), std::string::npos) << st.error().message();
  }
  // A router's public mapping (on the address the relay saw the peer come
  // from), and hosts the share link advertised.
  for (std::string good : {"203.0.113.2:7850", "198.18.0.9:7850", "192.168.1.10:7850"}) {
    EXPECT_TRUE(check_hint_target(good, ctx).ok()) << good;
  }
}

TEST(PathHint, OnePeersHintsMakeThisNodeDialOnlySoOften) {
  HintRateLimit limit;
  auto t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < HintRateLimit::kBurst; ++i) EXPECT_TRUE(limit.allow(t)) << i;
  EXPECT_FALSE(limit.allow(t));
  EXPECT_FALSE(limit.allow(t + HintRateLimit::kInterval / 2));
  EXPECT_TRUE(limit.allow(t + HintRateLimit::kInterval));
  EXPECT_FALSE(limit.allow(t + HintRateLimit::kInterval));
  EXPECT_TRUE(limit.allow(t + 10 * HintRateLimit::kInterval));
}

TEST(RelayProtocol, RefusesMalformedAndOversized) {
  std::string id = NodeId(key(1)).to_string();
  EXPECT_FALSE(decode_client_message(json::array()));
  EXPECT_FALSE(decode_client_message(json{{"type", "teleport"}, {"id", 1}}));
  EXPECT_FALSE(decode_client_message(json{{"type", "ping"}}));              // no id
  EXPECT_FALSE(decode_client_message(json{{"type", "ping"}, {"id", -1}}));  // signed
  EXPECT_FALSE(decode_client_message(json{{"type", "pipe"}, {"id", 1}, {"to", "NOT-AN-ID"}}));
  EXPECT_FALSE(decode_client_message(json{{"type", "register"}, {"node", id}, {"local_addr", "nowhere"}}));
  EXPECT_FALSE(decode_client_message(json{{"type", "register"}, {"node", id}, {"peers", "x"}}));
  json many = json::array();
  for (size_t i = 0; i <= kMaxPeers; ++i) many.push_back(id);
  auto too_many = decode_client_message(json{{"type", "register"}, {"node", id}, {"peers", many}});
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().code(), ErrorCode::kResourceExhausted);
  Bytes big(kMaxSignalBytes + 1, 'x');
  auto too_big = decode_client_message(json{{"type", "signal"}, {"id", 1}, {"to", id}, {"data", base64_encode(big)}});
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(decode_client_message(json{{"type", "signal"}, {"id", 1}, {"to", id}, {"data", "!!"}}));
  EXPECT_FALSE(decode_relay_message(json{{"type", "pipe_ready"}, {"id", 1}, {"peer", id}, {"ticket", "zz"}}));
}

TEST(RelayProtocol, ControlReaderHoldsItsBound) {
  ControlReader reader(1024);
  Bytes ok = link::encode_message(json{{"type", "ping"}, {"id", 1}});
  reader.feed(ok);
  auto m = reader.next();
  ASSERT_TRUE(m && *m);
  // An announced length over the bound fails as soon as that many bytes are
  // buffered without the message completing.
  Bytes big = link::encode_message(json{{"pad", std::string(4000, 'a')}});
  ControlReader r2(1024);
  r2.feed(ByteView(big.data(), 1100));
  auto e = r2.next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(r2.next());  // stays failed
  // A complete message over the bound fails too.
  ControlReader r3(1024);
  r3.feed(big);
  EXPECT_FALSE(r3.next());
}

TEST(RelayProtocol, PipePrefaceAndStatus) {
  Ticket t{};
  t[0] = 1;
  t[31] = 2;
  Bytes pre = encode_pipe_preface(t);
  ASSERT_EQ(pre.size(), kPipePrefaceBytes);
  EXPECT_EQ(pre[0], 'Y');
  auto back = decode_pipe_preface(pre);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, t);
  pre[1] = 'X';
  EXPECT_FALSE(decode_pipe_preface(pre));
  EXPECT_FALSE(decode_pipe_preface(ByteView(pre.data(), 10)));
  EXPECT_TRUE(pipe_status_to_status(0));
  for (uint8_t s : {1, 2, 3, 200}) EXPECT_FALSE(pipe_status_to_status(s));
}

// --- registry

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest()
      : registry_(RegistryLimits{.max_connections_per_node = 3,
                                 .max_pipes = 2,
                                 .max_peers = 8,
                                 .pipe_request_timeout = 30s,
                                 .ticket_timeout = 10s},
                  [this] {
                    Ticket t{};
                    t[0] = static_cast<uint8_t>(++tickets_);
                    return t;
                  }) {}

  // Admits and registers `node` on connection `conn` from `observed`.
  void join(ConnId conn, uint8_t node, std::vector<uint8_t> peers, NetAddress observed = {"127.0.0.1", 1000},
            std::optional<NetAddress> local = std::nullopt, bool probe = false) {
    ASSERT_FALSE(refusal_of(registry_.admit(key(node))));
    Register r{key(node), {}, {}, local, probe};
    for (uint8_t p : peers) r.peers.push_back(key(p));
    auto d = registry_.register_conn(conn, key(node), r, observed);
    ASSERT_FALSE(refusal_of(d)) << refusal_of(d)->message;
  }
  Reason reason(const auto& decision) {
    auto* r = refusal_of(decision);
    return r ? r->reason : Reason::kShuttingDown;  // "not refused" for these tests
  }

  int tickets_ = 0;
  Registry registry_;
  MonoTime t0_{};
};

TEST_F(RegistryTest, RegistrationIsBoundToTheSessionKey) {
  ASSERT_FALSE(refusal_of(registry_.admit(key(1))));
  Register claim{key(2), {}, {}, std::nullopt, false};
  EXPECT_EQ(reason(registry_.register_conn(1, key(1), claim, {"127.0.0.1", 1})), Reason::kIdentityMismatch);
  EXPECT_FALSE(registry_.registered(1));
  EXPECT_EQ(registry_.node_count(), 0u);
}

TEST_F(RegistryTest, PerNodeConnectionLimit) {
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(refusal_of(registry_.admit(key(1))));
  EXPECT_EQ(reason(registry_.admit(key(1))), Reason::kNodeConnectionLimit);
  EXPECT_FALSE(refusal_of(registry_.admit(key(2))));  // another node is not affected
  registry_.release(key(1));
  EXPECT_FALSE(refusal_of(registry_.admit(key(1))));
}

TEST_F(RegistryTest, SignalsNeedMutualDeclarationAndRevealNothingElse) {
  join(1, 1, {2, 3});  // A lists B and C
  join(2, 2, {1});     // B lists A
  join(3, 3, {});      // C lists nobody
  auto to_b = registry_.route_signal(1, key(2));
  ASSERT_FALSE(refusal_of(to_b));
  EXPECT_EQ(std::get<ConnId>(to_b), 2u);
  EXPECT_EQ(reason(registry_.route_signal(2, key(3))), Reason::kNotDeclared);
  // C is online but has not listed A: the same answer as if it were offline.
  EXPECT_EQ(reason(registry_.route_signal(1, key(3))), Reason::kPeerUnavailable);
  EXPECT_EQ(reason(registry_.route_signal(1, key(9))), Reason::kNotDeclared);
  ASSERT_FALSE(refusal_of(registry_.set_peers(3, {key(1)})));
  EXPECT_FALSE(refusal_of(registry_.route_signal(1, key(3))));
  EXPECT_EQ(reason(registry_.route_signal(99, key(3))), Reason::kNotRegistered);
  registry_.unregister(2);
  EXPECT_EQ(reason(registry_.route_signal(1, key(2))), Reason::kPeerUnavailable);
}

// A relay a node runs for its own peers hosts them; the peers of a peer may
// visit to reach it, but two visitors never reach each other, even when
// both declared the other, and a pairing token does not change that.
TEST_F(RegistryTest, VisitorsReachHostedNodesOnlyAndNeverEachOther) {
  std::set<PublicKeyBytes> hosted = {key(1)};  // the owner's peers
  registry_.set_hosts([&](const PublicKeyBytes& k) { return hosted.count(k) != 0; });
  Rendezvous token{};
  token[0] = 9;
  join(1, 1, {2, 3});  // hosted
  join(2, 2, {1, 3});  // a visitor for node 1
  join(3, 3, {1, 2});  // another visitor
  EXPECT_FALSE(refusal_of(registry_.route_signal(2, key(1))));
  EXPECT_FALSE(refusal_of(registry_.route_signal(1, key(2))));
  EXPECT_EQ(reason(registry_.route_signal(2, key(3))), Reason::kNotAllowed);
  EXPECT_EQ(reason(registry_.request_pipe(3, 1, key(2), t0_)), Reason::kNotAllowed);
  auto to_hosted = registry_.request_pipe(2, 2, key(1), t0_);
  ASSERT_FALSE(refusal_of(to_hosted)) << refusal_of(to_hosted)->message;
  // A visitor's pairing token does not open a pipe from another visitor.
  ASSERT_FALSE(refusal_of(registry_.set_peers(3, {key(1), key(2)}, {token})));
  EXPECT_EQ(reason(registry_.request_pipe(2, 3, key(3), t0_, token)), Reason::kNotAllowed);
  // Asked at each decision: once node 3 pairs with the owner, it is hosted.
  hosted.insert(key(3));
  EXPECT_FALSE(refusal_of(registry_.route_signal(2, key(3))));
}

TEST(Registry, VisitorsAreCappedAndHostedNodesAreNot) {
  Registry registry(RegistryLimits{.max_connections_per_node = 2, .max_visitors = 2}, [] { return Ticket{}; });
  registry.set_hosts([](const PublicKeyBytes& k) { return k == key(4); });
  EXPECT_FALSE(refusal_of(registry.admit(key(1))));
  EXPECT_FALSE(refusal_of(registry.admit(key(1))));  // a second connection of the same visitor
  EXPECT_FALSE(refusal_of(registry.admit(key(2))));
  auto third = registry.admit(key(3));
  ASSERT_TRUE(refusal_of(third));
  EXPECT_EQ(refusal_of(third)->reason, Reason::kNotAllowed);
  EXPECT_NE(refusal_of(third)->message.find("2 other nodes"), std::string::npos) << refusal_of(third)->message;
  EXPECT_FALSE(refusal_of(registry.admit(key(4))));
  registry.release(key(2));
  EXPECT_FALSE(refusal_of(registry.admit(key(3))));  // the visitor that left made room
}

// Pipes are counted per node apart from its connections: a provider many
// peers reach through the relay is not held to the connection limit, and
// one node cannot take every pipe.
TEST(Registry, PipesPerNodeAreCappedApartFromConnections) {
  int tickets = 0;
  Registry registry(RegistryLimits{.max_connections_per_node = 1, .max_pipes_per_node = 2, .max_pipes = 100},
                    [&] {
                      Ticket t{};
                      t[0] = static_cast<uint8_t>(++tickets);
                      return t;
                    });
  const MonoTime t0{};
  // Node 1 and its peers 2..4, each registered on one control connection.
  for (uint8_t n = 1; n <= 4; ++n) {
    ASSERT_FALSE(refusal_of(registry.admit(key(n))));
    Register r{key(n), {}, {}, std::nullopt, false};
    if (n == 1) {
      r.peers = {key(2), key(3), key(4)};
    } else {
      r.peers = {key(1)};
    }
    ASSERT_FALSE(refusal_of(registry.register_conn(n, key(n), r, {"127.0.0.1", 1000})));
  }
  for (uint8_t n = 2; n <= 3; ++n) {
    ASSERT_FALSE(refusal_of(registry.request_pipe(n, 1, key(1), t0)));
    auto match = registry.request_pipe(1, n, key(n), t0);
    ASSERT_FALSE(refusal_of(match)) << refusal_of(match)->message;
    // Both ends join: neither counts against the one-connection limit.
    for (int side = 0; side < 2; ++side) {
      const auto& m = std::get<Registry::PipeMatch>(std::get<Registry::PipeOutcome>(match));
      auto claim = registry.claim(m.sides[side].ticket, t0);
      ASSERT_FALSE(refusal_of(claim));
      EXPECT_FALSE(refusal_of(registry.admit(m.sides[side].node, Registry::Slot::kPipeEnd)));
    }
  }
  EXPECT_EQ(registry.pipe_count(), 2u);
  auto third = registry.request_pipe(4, 1, key(1), t0);
  ASSERT_TRUE(refusal_of(third));
  EXPECT_EQ(refusal_of(third)->reason, Reason::kTooManyPipes);
  EXPECT_NE(refusal_of(third)->message.find("2 pipes"), std::string::npos) << refusal_of(third)->message;
  // A second control connection is still held to its own limit.
  EXPECT_EQ(refusal_of(registry.admit(key(1)))->reason, Reason::kNodeConnectionLimit);
}

TEST_F(RegistryTest, DeliversToTheNewestRegistrationNotToProbes) {
  join(1, 1, {2});
  join(2, 2, {1});
  join(3, 2, {1});
  join(4, 2, {}, {"127.0.0.1", 1}, std::nullopt, /*probe=*/true);
  EXPECT_EQ(std::get<ConnId>(registry_.route_signal(1, key(2))), 3u);
  // The probe did not replace B's peers, and cannot talk itself.
  EXPECT_EQ(reason(registry_.route_signal(4, key(1))), Reason::kBadMessage);
  registry_.unregister(3);
  EXPECT_EQ(std::get<ConnId>(registry_.route_signal(1, key(2))), 2u);
}

TEST_F(RegistryTest, NatVerdictOverRegistrations) {
  join(1, 1, {}, {"203.0.113.1", 5000}, NetAddress{"10.0.0.2", 5000});
  ASSERT_FALSE(refusal_of(registry_.admit(key(1))));
  Register probe{key(1), {}, {}, NetAddress{"10.0.0.2", 5001}, true};
  auto d = registry_.register_conn(2, key(1), probe, {"203.0.113.1", 61234});
  ASSERT_FALSE(refusal_of(d));
  auto& reg = std::get<Registry::Registered>(d);
  EXPECT_EQ(reg.nat.mapping, Mapping::kPortChanging);
  EXPECT_EQ(reg.nat.nat, NatVerdict::kSymmetric);
  EXPECT_EQ(reg.nat.samples, 2u);
  ASSERT_EQ(reg.nat_changed.size(), 1u);  // the first connection learns the new verdict
  EXPECT_EQ(reg.nat_changed[0].first, 1u);
  EXPECT_EQ(reg.nat_changed[0].second.nat, NatVerdict::kSymmetric);
  EXPECT_EQ(reg.nat_changed[0].second.mapping, Mapping::kPortPreserving);
}

TEST_F(RegistryTest, PipesMatchOnMutualRequestsWithOneTimeTickets) {
  join(1, 1, {2});
  join(2, 2, {1});
  auto first = registry_.request_pipe(1, 11, key(2), t0_);
  ASSERT_FALSE(refusal_of(first));
  auto* wait = std::get_if<Registry::PipeWait>(&std::get<Registry::PipeOutcome>(first));
  ASSERT_TRUE(wait);
  EXPECT_EQ(wait->notify, 2u);
  EXPECT_EQ(reason(registry_.request_pipe(1, 12, key(2), t0_)), Reason::kPipePending);
  auto second = registry_.request_pipe(2, 21, key(1), t0_ + 1s);
  ASSERT_FALSE(refusal_of(second));
  auto match = std::get<Registry::PipeMatch>(std::get<Registry::PipeOutcome>(second));
  EXPECT_EQ(match.sides[0].conn, 1u);
  EXPECT_EQ(match.sides[0].request_id, 11u);
  EXPECT_TRUE(match.sides[0].initiator);
  EXPECT_EQ(match.sides[0].peer, key(2));
  EXPECT_EQ(match.sides[1].request_id, 21u);
  EXPECT_FALSE(match.sides[1].initiator);
  EXPECT_NE(match.sides[0].ticket, match.sides[1].ticket);
  EXPECT_EQ(registry_.pipe_count(), 1u);
  EXPECT_EQ(registry_.pending_requests(), 0u);

  auto claim = registry_.claim(match.sides[1].ticket, t0_ + 2s);
  ASSERT_FALSE(refusal_of(claim));
  EXPECT_EQ(std::get<Registry::Claim>(claim).side, 1);
  EXPECT_EQ(std::get<Registry::Claim>(claim).node, key(2));
  EXPECT_EQ(reason(registry_.claim(match.sides[1].ticket, t0_ + 2s)), Reason::kBadTicket);  // once
  Ticket forged{};
  forged[5] = 9;
  EXPECT_EQ(reason(registry_.claim(forged, t0_ + 2s)), Reason::kBadTicket);
  EXPECT_EQ(reason(registry_.claim(match.sides[0].ticket, t0_ + 12s)), Reason::kBadTicket);  // expired
}

// Pairing through the relay: node 2 (a provider) registered a token for its
// share link; node 1 (the link's holder) is declared by nobody, presents the
// token, and node 2 answers with it. Nothing else opens up between them.
TEST_F(RegistryTest, RendezvousTokensAllowOnePairingPipe) {
  Rendezvous token{};
  token[3] = 7;
  Rendezvous other = token;
  other[4] = 1;
  join(1, 1, {});
  join(2, 2, {});
  ASSERT_FALSE(refusal_of(registry_.set_peers(2, {}, {token})));
  // Without the token, or with a wrong one: as if node 2 were offline.
  EXPECT_EQ(reason(registry_.request_pipe(1, 1, key(2), t0_)), Reason::kNotDeclared);
  EXPECT_EQ(reason(registry_.request_pipe(1, 2, key(2), t0_, other)), Reason::kPeerUnavailable);
  EXPECT_EQ(reason(registry_.route_signal(1, key(2))), Reason::kNotDeclared);
  // Node 2 cannot use its own token to call on node 1 unprompted.
  EXPECT_EQ(reason(registry_.request_pipe(2, 3, key(1), t0_, token)), Reason::kPeerUnavailable);

  auto first = registry_.request_pipe(1, 11, key(2), t0_, token);
  ASSERT_FALSE(refusal_of(first)) << refusal_of(first)->message;
  auto* wait = std::get_if<Registry::PipeWait>(&std::get<Registry::PipeOutcome>(first));
  ASSERT_TRUE(wait);
  EXPECT_EQ(wait->notify, 2u);
  EXPECT_EQ(wait->rendezvous, token);
  // A plain request back does not answer a rendezvous request.
  EXPECT_EQ(reason(registry_.request_pipe(2, 20, key(1), t0_)), Reason::kNotDeclared);
  auto second = registry_.request_pipe(2, 21, key(1), t0_ + 1s, token);
  ASSERT_FALSE(refusal_of(second)) << refusal_of(second)->message;
  auto match = std::get<Registry::PipeMatch>(std::get<Registry::PipeOutcome>(second));
  EXPECT_EQ(match.sides[0].conn, 1u);
  EXPECT_TRUE(match.sides[0].initiator);
  EXPECT_EQ(match.sides[1].conn, 2u);
  // The token goes with the link: once node 2 drops it, it opens nothing.
  ASSERT_FALSE(refusal_of(registry_.set_peers(2, {}, {})));
  EXPECT_EQ(reason(registry_.request_pipe(1, 12, key(2), t0_ + 2s, token)), Reason::kPeerUnavailable);
}

TEST_F(RegistryTest, PipeRequestsAndUnjoinedPipesExpire) {
  join(1, 1, {2});
  join(2, 2, {1});
  ASSERT_FALSE(refusal_of(registry_.request_pipe(1, 5, key(2), t0_)));
  EXPECT_EQ(registry_.next_deadline(), t0_ + 30s);
  EXPECT_TRUE(registry_.expire(t0_ + 29s).requests.empty());
  auto gone = registry_.expire(t0_ + 30s);
  ASSERT_EQ(gone.requests.size(), 1u);
  EXPECT_EQ(gone.requests[0], (std::pair<ConnId, uint64_t>{1, 5}));

  ASSERT_FALSE(refusal_of(registry_.request_pipe(1, 6, key(2), t0_)));
  auto m = registry_.request_pipe(2, 7, key(1), t0_);
  PipeId id = std::get<Registry::PipeMatch>(std::get<Registry::PipeOutcome>(m)).pipe;
  auto expired = registry_.expire(t0_ + 10s);
  ASSERT_EQ(expired.pipes.size(), 1u);
  EXPECT_EQ(expired.pipes[0], id);
  EXPECT_EQ(registry_.pipe_count(), 0u);
  EXPECT_FALSE(registry_.next_deadline());
}

TEST_F(RegistryTest, PipeCapAndJoinedPipesDoNotExpire) {
  join(1, 1, {2, 3, 4});
  join(2, 2, {1});
  join(3, 3, {1});
  join(4, 4, {1});
  std::vector<PipeId> ids;
  for (uint8_t peer : {2, 3}) {
    ASSERT_FALSE(refusal_of(registry_.request_pipe(1, peer, key(peer), t0_)));
    auto m = registry_.request_pipe(peer, 100, key(1), t0_);
    ASSERT_FALSE(refusal_of(m));
    ids.push_back(std::get<Registry::PipeMatch>(std::get<Registry::PipeOutcome>(m)).pipe);
  }
  EXPECT_EQ(reason(registry_.request_pipe(4, 1, key(1), t0_)), Reason::kTooManyPipes);
  registry_.pipe_joined(ids[0]);
  EXPECT_TRUE(registry_.expire(t0_ + 1h).pipes.size() == 1);  // only the unjoined one
  EXPECT_EQ(registry_.pipe_count(), 1u);
  registry_.pipe_closed(ids[0]);
  EXPECT_EQ(registry_.pipe_count(), 0u);
}

TEST_F(RegistryTest, ClosingAConnectionDropsItsWaitingRequests) {
  join(1, 1, {2});
  join(2, 2, {1});
  ASSERT_FALSE(refusal_of(registry_.request_pipe(1, 5, key(2), t0_)));
  registry_.unregister(1);
  EXPECT_EQ(registry_.pending_requests(), 0u);
  EXPECT_EQ(registry_.node_count(), 1u);
}

TEST(RelayMetrics, RendersPrometheusText) {
  Metrics m;
  m.bytes_relayed_total = 12345;
  m.refused(Reason::kNotDeclared);
  m.refused(Reason::kNotDeclared);
  Gauges g;
  g.nodes = 3;
  std::string text = render_prometheus(m, g);
  EXPECT_NE(text.find("# TYPE yonder_relay_bytes_relayed_total counter\nyonder_relay_bytes_relayed_total 12345\n"),
            std::string::npos);
  EXPECT_NE(text.find("yonder_relay_nodes 3\n"), std::string::npos);
  EXPECT_NE(text.find("yonder_relay_refusals_total{reason=\"not_declared\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("yonder_relay_refusals_total{reason=\"bad_ticket\"} 0\n"), std::string::npos);
}

}  // namespace
}  // namespace yonder::relay
