#include "net/punch/stun.h"

#include <openssl/rand.h>

#include <cstdlib>
#include <string>

namespace yonder::punch {
namespace {

constexpr uint16_t kBindingRequest = 0x0001;
constexpr uint16_t kBindingSuccess = 0x0101;
constexpr uint16_t kBindingError = 0x0111;
constexpr uint16_t kAttrMappedAddress = 0x0001;
constexpr uint16_t kAttrErrorCode = 0x0009;
constexpr uint16_t kAttrXorMappedAddress = 0x0020;
constexpr uint8_t kFamilyV4 = 0x01;
constexpr uint8_t kFamilyV6 = 0x02;

uint16_t get16(ByteView b, size_t at) {
  return static_cast<uint16_t>((b[at] << 8) | b[at + 1]);
}
uint32_t get32(ByteView b, size_t at) {
  return (static_cast<uint32_t>(b[at]) << 24) | (static_cast<uint32_t>(b[at + 1]) << 16) |
         (static_cast<uint32_t>(b[at + 2]) << 8) | b[at + 3];
}
void put16(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}
void put32(Bytes& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v >> 16));
  put16(out, static_cast<uint16_t>(v));
}

// The 20-byte header, with `length` bytes of attributes to follow.
void put_header(Bytes& out, uint16_t type, uint16_t length, const uint8_t* transaction) {
  put16(out, type);
  put16(out, length);
  put32(out, kStunMagicCookie);
  out.insert(out.end(), transaction, transaction + 12);
}

// Header checks shared by both sides: size bounds, the cookie, a length that
// matches the datagram and is a multiple of 4 (RFC 8489 section 5).
bool header_ok(ByteView b) {
  if (b.size() < kStunHeaderBytes || b.size() > kMaxStunMessageBytes) return false;
  if ((b[0] & 0xc0) != 0) return false;
  uint16_t length = get16(b, 2);
  return length % 4 == 0 && kStunHeaderBytes + length == b.size() && get32(b, 4) == kStunMagicCookie;
}

// An address attribute's value; `xored` undoes XOR-MAPPED-ADDRESS's mask.
std::optional<udp::endpoint> parse_address(ByteView v, bool xored, ByteView header) {
  if (v.size() < 4) return std::nullopt;
  uint8_t family = v[1];
  uint16_t port = get16(v, 2);
  if (xored) port ^= static_cast<uint16_t>(kStunMagicCookie >> 16);
  if (family == kFamilyV4 && v.size() == 8) {
    uint32_t a = get32(v, 4);
    if (xored) a ^= kStunMagicCookie;
    return udp::endpoint(boost::asio::ip::address_v4(a), port);
  }
  if (family == kFamilyV6 && v.size() == 20) {
    boost::asio::ip::address_v6::bytes_type a{};
    for (size_t i = 0; i < 16; ++i) {
      a[i] = v[4 + i];
      if (xored) a[i] ^= header[4 + i];  // cookie, then the transaction id
    }
    return udp::endpoint(boost::asio::ip::address_v6(a), port);
  }
  return std::nullopt;
}

}  // namespace

StunTransactionId random_transaction_id() {
  StunTransactionId id{};
  if (RAND_bytes(id.data(), static_cast<int>(id.size())) != 1) std::abort();  // no randomness: nothing is safe
  return id;
}

bool looks_like_stun(ByteView d) {
  return d.size() >= kStunHeaderBytes && (d[0] & 0xc0) == 0 && get32(d, 4) == kStunMagicCookie;
}

Bytes encode_binding_request(const StunTransactionId& id) {
  Bytes out;
  out.reserve(kStunHeaderBytes);
  put_header(out, kBindingRequest, 0, id.data());
  return out;
}

Result<udp::endpoint> decode_binding_response(ByteView b, const StunTransactionId& expected) {
  if (!header_ok(b)) return make_error(ErrorCode::kInvalidArgument, "not a STUN message");
  if (!std::equal(expected.begin(), expected.end(), b.begin() + 8)) {
    return make_error(ErrorCode::kInvalidArgument, "a STUN message for another transaction");
  }
  uint16_t type = get16(b, 0);
  if (type != kBindingSuccess && type != kBindingError) {
    return make_error(ErrorCode::kInvalidArgument, "not a STUN Binding response");
  }
  std::optional<udp::endpoint> mapped, xor_mapped;
  std::string error;
  size_t at = kStunHeaderBytes;
  while (at + 4 <= b.size()) {
    uint16_t attr = get16(b, at);
    size_t len = get16(b, at + 2);
    size_t padded = (len + 3) & ~size_t{3};
    if (at + 4 + padded > b.size()) return make_error(ErrorCode::kInvalidArgument, "a truncated STUN attribute");
    ByteView v = b.subspan(at + 4, len);
    if (attr == kAttrXorMappedAddress && !xor_mapped) xor_mapped = parse_address(v, true, b.first(kStunHeaderBytes));
    if (attr == kAttrMappedAddress && !mapped) mapped = parse_address(v, false, b.first(kStunHeaderBytes));
    if (attr == kAttrErrorCode && v.size() >= 4 && error.empty()) {
      int code = (v[2] & 0x07) * 100 + v[3] % 100;
      std::string reason;
      for (size_t i = 4; i < v.size() && reason.size() < 80; ++i) {
        reason += (v[i] >= 0x20 && v[i] < 0x7f) ? static_cast<char>(v[i]) : '?';
      }
      error = std::to_string(code) + (reason.empty() ? "" : " " + reason);
    }
    at += 4 + padded;
  }
  if (type == kBindingError) {
    return make_error(ErrorCode::kUnavailable,
                      "the STUN server refused the Binding request (" + (error.empty() ? "no code" : error) + ")");
  }
  if (xor_mapped) return *xor_mapped;
  if (mapped) return *mapped;
  return make_error(ErrorCode::kInvalidArgument, "a STUN Binding response without a mapped address");
}

std::optional<Bytes> answer_binding_request(ByteView request, const udp::endpoint& from) {
  if (!header_ok(request) || get16(request, 0) != kBindingRequest) return std::nullopt;
  auto ip = from.address();
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) ip = ip.to_v6().to_v4();  // a dual-stack socket's view of IPv4
  Bytes out;
  bool v4 = ip.is_v4();
  uint16_t value_len = v4 ? 8 : 20;
  out.reserve(kStunHeaderBytes + 4 + value_len);
  put_header(out, kBindingSuccess, static_cast<uint16_t>(4 + value_len), request.data() + 8);
  put16(out, kAttrXorMappedAddress);
  put16(out, value_len);
  out.push_back(0);
  out.push_back(v4 ? kFamilyV4 : kFamilyV6);
  put16(out, from.port() ^ static_cast<uint16_t>(kStunMagicCookie >> 16));
  if (v4) {
    put32(out, ip.to_v4().to_uint() ^ kStunMagicCookie);
  } else {
    auto a = ip.to_v6().to_bytes();
    for (size_t i = 0; i < 16; ++i) out.push_back(a[i] ^ out[4 + i]);  // cookie + transaction id from the header
  }
  return out;
}

}  // namespace yonder::punch
