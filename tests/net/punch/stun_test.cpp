// The STUN codec (net/punch/stun.h): our request, the responder, the
// decoder against RFC 5769's test vector, and what the responder ignores.
#include <gtest/gtest.h>

#include "net/punch/stun.h"

namespace yonder::punch {
namespace {

namespace ip = boost::asio::ip;

StunTransactionId rfc5769_id() {
  return {0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae};
}

TEST(Stun, RequestIsAHeaderWithCookieAndTransaction) {
  auto id = random_transaction_id();
  Bytes req = encode_binding_request(id);
  ASSERT_EQ(req.size(), kStunHeaderBytes);
  EXPECT_EQ(req[0], 0x00);
  EXPECT_EQ(req[1], 0x01);
  EXPECT_EQ(req[2], 0x00);
  EXPECT_EQ(req[3], 0x00);
  EXPECT_EQ(Bytes(req.begin() + 4, req.begin() + 8), (Bytes{0x21, 0x12, 0xa4, 0x42}));
  EXPECT_TRUE(std::equal(id.begin(), id.end(), req.begin() + 8));
  EXPECT_TRUE(looks_like_stun(req));
  EXPECT_NE(random_transaction_id(), id);
}

// RFC 5769 section 2.2: a Binding success response with SOFTWARE,
// XOR-MAPPED-ADDRESS 192.0.2.1:32853, MESSAGE-INTEGRITY and FINGERPRINT.
TEST(Stun, DecodesTheRfc5769Ipv4Response) {
  Bytes v = {0x01, 0x01, 0x00, 0x3c, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
             0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63,
             0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43,
             0x00, 0x08, 0x00, 0x14, 0x2b, 0x91, 0xf5, 0x99, 0xfd, 0x9e, 0x90, 0xc3, 0x8c, 0x74, 0x89, 0xf9,
             0x2a, 0xf9, 0xba, 0x53, 0xf0, 0x6b, 0xe7, 0xd7, 0x80, 0x28, 0x00, 0x04, 0xc0, 0x7d, 0x4c, 0x96};
  auto r = decode_binding_response(v, rfc5769_id());
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, udp::endpoint(ip::make_address("192.0.2.1"), 32853));

  auto other = rfc5769_id();
  other[11] ^= 1;
  EXPECT_FALSE(decode_binding_response(v, other));
  // Cut anywhere: never accepted, never read past the end.
  for (size_t n = 0; n < v.size(); ++n) EXPECT_FALSE(decode_binding_response(ByteView(v.data(), n), rfc5769_id()));
}

TEST(Stun, ResponderAndClientAgreeOnV4AndV6) {
  for (const char* addr : {"203.0.113.2", "2001:db8:1234:5678:11:2233:4455:6677"}) {
    udp::endpoint from(ip::make_address(addr), 40123);
    auto id = random_transaction_id();
    Bytes req = encode_binding_request(id);
    auto resp = answer_binding_request(req, from);
    ASSERT_TRUE(resp) << addr;
    EXPECT_LE(resp->size(), req.size() + 24) << "no amplification beyond an address";
    auto r = decode_binding_response(*resp, id);
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(*r, from);
  }
}

TEST(Stun, ResponderSeesIpv4MappedAddressesAsIpv4) {
  udp::endpoint from(ip::make_address("::ffff:198.51.100.2"), 5000);
  auto id = random_transaction_id();
  auto resp = answer_binding_request(encode_binding_request(id), from);
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->size(), 32u);
  EXPECT_EQ(*decode_binding_response(*resp, id), udp::endpoint(ip::make_address("198.51.100.2"), 5000));
}

TEST(Stun, ResponderIgnoresAllButWellFormedBindingRequests) {
  udp::endpoint from(ip::make_address("203.0.113.2"), 1);
  Bytes good = encode_binding_request(random_transaction_id());
  ASSERT_TRUE(answer_binding_request(good, from));

  auto with = [&](size_t at, uint8_t value) {
    Bytes b = good;
    b[at] = value;
    return b;
  };
  EXPECT_FALSE(answer_binding_request(with(1, 0x11), from)) << "an indication";
  EXPECT_FALSE(answer_binding_request(with(1, 0x02), from)) << "another method";
  EXPECT_FALSE(answer_binding_request(with(0, 0x01), from)) << "a response";
  EXPECT_FALSE(answer_binding_request(with(0, 0x40), from)) << "a QUIC-looking first byte";
  EXPECT_FALSE(answer_binding_request(with(4, 0x22), from)) << "a wrong cookie (RFC 3489 client)";
  EXPECT_FALSE(answer_binding_request(with(3, 0x04), from)) << "a length the datagram does not have";
  Bytes odd = good;
  odd.push_back(0);
  EXPECT_FALSE(answer_binding_request(odd, from)) << "trailing byte";
  EXPECT_FALSE(answer_binding_request(ByteView(good.data(), 19), from));
  EXPECT_FALSE(answer_binding_request(ByteView(), from));

  // Attributes are allowed (and ignored) up to the size bound.
  Bytes with_attr = good;
  with_attr[3] = 8;
  for (uint8_t b : std::initializer_list<uint8_t>{0x80, 0x22, 0x00, 0x04, 't', 'e', 's', 't'}) with_attr.push_back(b);
  EXPECT_TRUE(answer_binding_request(with_attr, from));
  Bytes huge(kMaxStunMessageBytes + 4, 0);
  std::copy(good.begin(), good.end(), huge.begin());
  huge[2] = static_cast<uint8_t>((huge.size() - 20) >> 8);
  huge[3] = static_cast<uint8_t>(huge.size() - 20);
  EXPECT_FALSE(answer_binding_request(huge, from)) << "over the size bound";
}

TEST(Stun, ErrorResponsesSayTheCode) {
  auto id = random_transaction_id();
  Bytes b = {0x01, 0x11, 0x00, 0x0c, 0x21, 0x12, 0xa4, 0x42};
  b.insert(b.end(), id.begin(), id.end());
  for (uint8_t x : std::initializer_list<uint8_t>{0x00, 0x09, 0x00, 0x08, 0x00, 0x00, 0x04, 0x00, 'B', 'a', 'd', '!'})
    b.push_back(x);
  auto r = decode_binding_response(b, id);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("400 Bad!"), std::string::npos) << r.error().message();
}

TEST(Stun, ResponseWithoutAddressIsAnError) {
  auto id = random_transaction_id();
  Bytes b = {0x01, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42};
  b.insert(b.end(), id.begin(), id.end());
  EXPECT_FALSE(decode_binding_response(b, id));
}

}  // namespace
}  // namespace yonder::punch
