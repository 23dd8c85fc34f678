// The NAT check's verdicts and its bounded retransmissions (net/punch/nat_check.h),
// with a manual clock and the relay's own responder answering.
#include <gtest/gtest.h>

#include "net/punch/nat_check.h"

namespace yonder::punch {
namespace {

namespace ip = boost::asio::ip;
using namespace std::chrono_literals;

udp::endpoint ep(const char* a, uint16_t port) {
  return udp::endpoint(ip::make_address(a), port);
}

const udp::endpoint kRelay1 = ep("198.18.0.1", 7851);
const udp::endpoint kRelay2 = ep("198.18.0.2", 7851);

// Answers every request in `out` as seen from `mapped_for(server)`.
void answer(NatCheck& check, MonoTime now, const std::vector<OutgoingDatagram>& out,
            const std::function<std::optional<udp::endpoint>(const udp::endpoint&)>& mapped_for) {
  for (const auto& d : out) {
    auto m = mapped_for(d.to);
    if (!m) continue;
    auto resp = answer_binding_request(d.bytes, *m);
    ASSERT_TRUE(resp);
    EXPECT_TRUE(check.on_datagram(now, d.to, *resp));
  }
}

TEST(NatCheck, SameMappingTowardsBothRelaysIsPunchable) {
  MonoTime t{};
  NatCheck check({.servers = {kRelay1, kRelay2}});
  check.start(t);
  auto out = check.take_datagrams();
  ASSERT_EQ(out.size(), 2u);
  answer(check, t, out, [](const udp::endpoint&) { return ep("203.0.113.2", 40000); });
  ASSERT_TRUE(check.done());
  EXPECT_EQ(check.result().nat, NatKind::kPunchable) << check.result().why;
  EXPECT_EQ(check.result().public_address, ep("203.0.113.2", 40000));
  EXPECT_NE(check.result().why.find("endpoint-independent"), std::string::npos);
}

TEST(NatCheck, DifferentMappingsAreSymmetric) {
  MonoTime t{};
  NatCheck check({.servers = {kRelay1, kRelay2}});
  check.start(t);
  answer(check, t, check.take_datagrams(),
         [](const udp::endpoint& server) { return ep("198.51.100.2", server == kRelay1 ? 1111 : 2222); });
  ASSERT_TRUE(check.done());
  EXPECT_EQ(check.result().nat, NatKind::kSymmetric);
  EXPECT_NE(check.result().why.find("symmetric"), std::string::npos) << check.result().why;
  EXPECT_NE(check.result().why.find("198.51.100.2:2222"), std::string::npos) << check.result().why;
}

TEST(NatCheck, OneAnswerGivesTheAddressButNoVerdict) {
  MonoTime t{};
  NatCheck check({.servers = {kRelay1, kRelay2}, .timeout = 3000ms});
  check.start(t);
  answer(check, t, check.take_datagrams(), [](const udp::endpoint& s) -> std::optional<udp::endpoint> {
    if (s == kRelay1) return ep("203.0.113.2", 5);
    return std::nullopt;
  });
  EXPECT_FALSE(check.done());
  while (!check.done()) {
    t = *check.next_deadline();
    check.on_timer(t);
    check.take_datagrams();
  }
  EXPECT_EQ(check.result().nat, NatKind::kUnknown);
  EXPECT_EQ(check.result().public_address, ep("203.0.113.2", 5));
  EXPECT_NE(check.result().why.find("only one"), std::string::npos) << check.result().why;
}

TEST(NatCheck, SilenceRetransmitsABoundedNumberOfTimesThenGivesUp) {
  MonoTime start{};
  MonoTime t = start;
  NatCheck check({.servers = {kRelay1, kRelay2}, .max_sends = 5, .timeout = 5000ms});
  check.start(t);
  size_t sent = check.take_datagrams().size();
  std::vector<std::chrono::milliseconds> at;
  while (!check.done()) {
    t = *check.next_deadline();
    check.on_timer(t);
    auto out = check.take_datagrams();
    if (!out.empty()) at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(t - start));
    sent += out.size();
  }
  EXPECT_EQ(sent, 10u);  // 5 per relay
  EXPECT_EQ(at, (std::vector<std::chrono::milliseconds>{200ms, 600ms, 1400ms, 3000ms}));
  EXPECT_EQ(t - start, 5000ms);
  EXPECT_EQ(check.result().nat, NatKind::kUnknown);
  EXPECT_FALSE(check.result().public_address);
  EXPECT_NE(check.result().why.find("block"), std::string::npos) << check.result().why;
}

TEST(NatCheck, IgnoresAnswersFromElsewhereOrForOtherTransactions) {
  MonoTime t{};
  NatCheck check({.servers = {kRelay1}});
  check.start(t);
  auto out = check.take_datagrams();
  ASSERT_EQ(out.size(), 1u);
  auto resp = answer_binding_request(out[0].bytes, ep("203.0.113.2", 9));
  EXPECT_FALSE(check.on_datagram(t, ep("198.18.0.9", 7851), *resp)) << "not the relay we asked";
  Bytes other = encode_binding_request(random_transaction_id());
  EXPECT_FALSE(check.on_datagram(t, kRelay1, *answer_binding_request(other, ep("203.0.113.2", 9))));
  EXPECT_TRUE(check.on_datagram(t, kRelay1, *resp));
  EXPECT_TRUE(check.done());
}

}  // namespace
}  // namespace yonder::punch
