// Punch signals (net/punch/signal.h) and punch packets (punch_packet.h).
#include <gtest/gtest.h>

#include "net/punch/punch_packet.h"
#include "net/punch/signal.h"
#include "net/punch/stun.h"

namespace yonder::punch {
namespace {

namespace ip = boost::asio::ip;

Candidate host(const char* a, uint16_t port) {
  return Candidate{udp::endpoint(ip::make_address(a), port), CandidateKind::kHost};
}
Candidate srflx(const char* a, uint16_t port) {
  return Candidate{udp::endpoint(ip::make_address(a), port), CandidateKind::kServerReflexive};
}

TEST(PunchSignal, RoundTrips) {
  Offer offer{
      0x0123456789abcdefULL, 2, 2, NatKind::kPunchable, {host("192.168.1.10", 4000), srflx("203.0.113.2", 4000)}};
  Answer answer{42, 1, 3, NatKind::kSymmetric, {srflx("2001:db8::1", 65535)}};
  Go go{7};
  for (const PunchSignal& s : {PunchSignal(offer), PunchSignal(answer), PunchSignal(go)}) {
    Bytes b = encode_punch_signal(s);
    EXPECT_TRUE(is_punch_signal(b));
    auto back = decode_punch_signal(b);
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_EQ(*back, s);
  }
  Offer full{1, kMaxAttemptNumber, kMaxAttemptNumber, NatKind::kUnknown, {}};
  for (size_t i = 0; i < kMaxCandidates; ++i)
    full.candidates.push_back(srflx("2001:db8::2", static_cast<uint16_t>(1 + i)));
  EXPECT_EQ(encode_punch_signal(full).size(), kMaxPunchSignalBytes);
}

TEST(PunchSignal, PathHintsAreNotPunchSignals) {
  EXPECT_FALSE(is_punch_signal(as_bytes(R"({"v":1,"mapped":"203.0.113.2:7850"})")));
  EXPECT_FALSE(decode_punch_signal(as_bytes(R"({"v":1})")));
}

TEST(PunchSignal, CarriesTheBirthdayFlagAndStillReadsVersionOne) {
  Offer offer{9, 1, 2, NatKind::kSymmetric, {srflx("203.0.113.2", 4000)}, true};
  Bytes v2 = encode_punch_signal(offer);
  EXPECT_EQ(v2[3], 2);
  EXPECT_EQ(v2[16], 1) << "flags: birthday";
  auto back = decode_punch_signal(v2);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(std::get<Offer>(*back), offer);
  // A version 1 peer writes no flags byte: read as "no birthday probing".
  Bytes v1 = v2;
  v1[3] = 1;
  v1.erase(v1.begin() + 16);
  auto old = decode_punch_signal(v1);
  ASSERT_TRUE(old) << old.error().to_string();
  offer.birthday = false;
  EXPECT_EQ(std::get<Offer>(*old), offer);
}

TEST(PunchSignal, RejectsWhatIsMalformed) {
  Bytes good = encode_punch_signal(Offer{9, 1, 2, NatKind::kPunchable, {srflx("203.0.113.2", 4000)}});
  ASSERT_TRUE(decode_punch_signal(good));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode_punch_signal(ByteView(good.data(), n))) << "cut to " << n;
  }
  auto with = [&](size_t at, uint8_t value) {
    Bytes b = good;
    b[at] = value;
    return b;
  };
  auto error_of = [](const Bytes& b) {
    auto r = decode_punch_signal(b);
    return r ? std::string("accepted") : r.error().message();
  };
  Bytes trailing = good;
  trailing.push_back(0);
  EXPECT_NE(error_of(trailing).find("trailing"), std::string::npos);
  EXPECT_NE(error_of(with(3, 3)).find("version 3"), std::string::npos);
  EXPECT_NE(error_of(with(3, 0)).find("version 0"), std::string::npos);
  EXPECT_NE(error_of(with(4, 9)).find("type"), std::string::npos);
  EXPECT_NE(error_of(with(13, 0)).find("attempt"), std::string::npos);
  EXPECT_NE(error_of(with(13, 3)).find("attempt"), std::string::npos) << "attempt 3 of 2";
  EXPECT_NE(error_of(with(14, kMaxAttemptNumber + 1)).find("attempt"), std::string::npos);
  EXPECT_NE(error_of(with(15, 3)).find("NAT"), std::string::npos);
  EXPECT_EQ(error_of(with(16, 0xfe)), "accepted") << "unknown flag bits are a newer peer's capabilities";
  EXPECT_NE(error_of(with(17, 9)).find("candidates"), std::string::npos);
  EXPECT_NE(error_of(with(18, 3)).find("kind"), std::string::npos);
  EXPECT_NE(error_of(with(19, 5)).find("family"), std::string::npos);
  Bytes zero_addr = good;
  std::fill(zero_addr.begin() + 20, zero_addr.begin() + 24, 0);
  EXPECT_NE(error_of(zero_addr).find("reached"), std::string::npos);
  Bytes zero_port = good;
  zero_port[24] = zero_port[25] = 0;
  EXPECT_NE(error_of(zero_port).find("port 0"), std::string::npos);
  Bytes huge(kMaxPunchSignalBytes + 1, 0);
  std::copy(good.begin(), good.end(), huge.begin());
  EXPECT_NE(error_of(huge).find("too long"), std::string::npos);
}

TEST(PunchPacket, RoundTripsAndIsNeitherStunNorQuic) {
  PunchPacket p{PunchType::kAck, 0xfeedfacecafebeefULL, punch_tag(5, PublicKeyBytes{1}), 513};
  Bytes b = encode_punch_packet(p);
  ASSERT_EQ(b.size(), kPunchPacketBytes);
  auto back = decode_punch_packet(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->type, p.type);
  EXPECT_EQ(back->session, p.session);
  EXPECT_EQ(back->sender, p.sender);
  EXPECT_EQ(back->seq, p.seq);
  EXPECT_EQ(classify_datagram(b), DatagramKind::kPunch);
  EXPECT_EQ(b[0] & 0x40, 0) << "QUIC packets have the fixed bit set";
  EXPECT_EQ(classify_datagram(encode_binding_request(random_transaction_id())), DatagramKind::kStun);
  EXPECT_EQ(classify_datagram(Bytes{0xc0, 0, 0, 0, 1}), DatagramKind::kQuic);
  EXPECT_EQ(classify_datagram(Bytes{0x0b, 'Y'}), DatagramKind::kOther);
  Bytes longer = b;
  longer.push_back(0);
  EXPECT_FALSE(decode_punch_packet(longer));
  Bytes bad_type = b;
  bad_type[5] = 3;
  EXPECT_FALSE(decode_punch_packet(bad_type));
}

TEST(PunchPacket, TagsDependOnKeyAndSession) {
  PublicKeyBytes a{1}, b{2};
  EXPECT_NE(punch_tag(1, a), punch_tag(1, b));
  EXPECT_NE(punch_tag(1, a), punch_tag(2, a));
  EXPECT_EQ(punch_tag(1, a), punch_tag(1, a));
}

}  // namespace
}  // namespace yonder::punch
