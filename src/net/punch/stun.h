// The part of STUN (RFC 8489) Yonder uses: a Binding request, answered by a
// Binding success response carrying XOR-MAPPED-ADDRESS, the address the
// request came from as the server saw it (the node's server-reflexive
// address, i.e. its NAT's public mapping for this socket).
//
//   client                                  relay (UDP, same port number as its TCP port)
//     Binding request  [type 0x0001, len, cookie 0x2112A442, 96-bit transaction id]  ->
//     <- Binding success [type 0x0101, same transaction id, XOR-MAPPED-ADDRESS]
//
// Everything else (other methods, indications, responses arriving at the
// server, requests with a bad cookie or length, anything over
// kMaxStunMessageBytes) is ignored, never answered: the responder cannot be
// made to send more than it received plus 24 bytes (an IPv6 address), and
// the relay rate-limits its answers on top (relay/stun_responder.h).
// Attributes of a request, including MESSAGE-INTEGRITY and FINGERPRINT, are
// not checked and not needed: the answer only says where the request came
// from, which is no secret from the one who sent it.
//
// Untrusted input on both sides: bounded, never throws, never reads past the
// buffer. Fuzzed by fuzz/stun_fuzz.cpp.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <array>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <optional>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::punch {

using udp = boost::asio::ip::udp;

constexpr uint32_t kStunMagicCookie = 0x2112A442;
constexpr size_t kStunHeaderBytes = 20;
// Neither side looks at a STUN message longer than this (RFC 8489 section 6.1:
// 548 bytes is what a path without fragmentation surely carries).
constexpr size_t kMaxStunMessageBytes = 548;

using StunTransactionId = std::array<uint8_t, 12>;

// 96 random bits from the system's CSPRNG (aborts if there is none).
StunTransactionId random_transaction_id();

// Whether a datagram could be STUN at all: first two bits zero and the magic
// cookie in bytes 4-7 (RFC 7983's demultiplexing rule, made stricter). Punch
// packets (punch_packet.h) and QUIC packets never pass this.
bool looks_like_stun(ByteView datagram);

// A Binding request with no attributes (20 bytes).
Bytes encode_binding_request(const StunTransactionId& id);

// The mapped address in a Binding success response to the request with
// transaction id `expected`. Errors: not a STUN message, another
// transaction, an error response (code and reason in the message), no
// (XOR-)MAPPED-ADDRESS. MAPPED-ADDRESS is accepted when XOR-MAPPED-ADDRESS
// is missing (RFC 3489 servers).
Result<udp::endpoint> decode_binding_response(ByteView bytes, const StunTransactionId& expected);

// The server side: the success response telling `from` its address, for a
// well-formed Binding request; nothing for any other datagram.
std::optional<Bytes> answer_binding_request(ByteView request, const udp::endpoint& from);

}  // namespace yonder::punch
