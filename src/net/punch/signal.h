// The hole-punching messages two peers exchange through the relay's opaque
// `signal` (relay/protocol.h: at most 4 KiB, only between mutually declared
// peers). The exchange is in puncher.h:
//
//   initiator                         responder
//     offer {session, attempt, nat, candidates}  ->
//     <- answer {session, attempt, nat, candidates}
//     go {session}  ->                (both start punching when go lands)
//
// Compact binary, versioned, so a receiver tells it from the JSON path hints
// (relay/path_hint.h, first byte '{') by its first bytes (is_punch_signal):
//
//   bytes 0-2  "YPS"      byte 3  version (2)     byte 4  type (1 offer, 2 answer, 3 go)
//   bytes 5-12 session id (big endian)
//   offer/answer: byte attempt, byte attempts (the initiator makes this many
//   in all; 1 <= attempt <= attempts <= kMaxAttemptNumber), byte nat (0
//   unknown, 1 punchable, 2 symmetric), byte flags (version 2 only: bit 0
//   "agrees to birthday probing", puncher.h; other bits are ignored, for
//   later capabilities), byte n (0..kMaxCandidates), then n candidates:
//   byte kind (1 host, 2 srflx), byte family (4 or 6), 4 or 16 address
//   bytes, 2 port bytes (big endian, not 0)
//
// Version 1 (no flags byte) is still read, as "no birthday probing". At
// most 178 bytes. The decoder is strict: a wrong magic, version, type,
// count, kind, family, port, an unspecified or multicast address, a short
// message or a trailing byte is an error naming what was wrong. Fuzzed by
// fuzz/punch_signal_fuzz.cpp.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <variant>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::punch {

using udp = boost::asio::ip::udp;

constexpr size_t kMaxCandidates = 8;
constexpr uint8_t kMaxAttemptNumber = 16;
constexpr size_t kMaxPunchSignalBytes = 13 + 5 + kMaxCandidates * 20;

enum class CandidateKind : uint8_t {
  kHost = 1,             // the socket's own address (same LAN)
  kServerReflexive = 2,  // the NAT's public mapping, as a STUN server saw it
};

// What a node knows of its own NAT (nat_check.h).
enum class NatKind : uint8_t {
  kUnknown = 0,    // could not tell (one STUN server answered, or none)
  kPunchable = 1,  // endpoint-independent mapping: the same public port towards everyone
  kSymmetric = 2,  // a new public port per destination: punching cannot work, stay on the relay
};

struct Candidate {
  udp::endpoint address;
  CandidateKind kind = CandidateKind::kHost;
  bool operator==(const Candidate&) const = default;
};

// offer (from the initiator) and answer (from the responder) have the same shape.
struct Offer {
  uint64_t session = 0;
  uint8_t attempt = 1;
  uint8_t attempts = 1;  // the responder waits for a retry only while attempt < attempts
  NatKind nat = NatKind::kUnknown;
  std::vector<Candidate> candidates;
  bool birthday = false;  // agrees to birthday probing (flags bit 0)
  bool operator==(const Offer&) const = default;
};
struct Answer {
  uint64_t session = 0;
  uint8_t attempt = 1;
  uint8_t attempts = 1;
  NatKind nat = NatKind::kUnknown;
  std::vector<Candidate> candidates;
  bool birthday = false;  // agrees to birthday probing (flags bit 0)
  bool operator==(const Answer&) const = default;
};
struct Go {
  uint64_t session = 0;
  bool operator==(const Go&) const = default;
};

using PunchSignal = std::variant<Offer, Answer, Go>;

// Whether `bytes` claim to be a punch signal (magic only; decode to know more).
bool is_punch_signal(ByteView bytes);
// Aborts on a broken invariant: more than kMaxCandidates, attempt 0, or
// attempt > attempts > kMaxAttemptNumber (the caller builds these, never a peer).
Bytes encode_punch_signal(const PunchSignal& signal);
Result<PunchSignal> decode_punch_signal(ByteView bytes);

const char* nat_kind_name(NatKind nat);
const char* candidate_kind_name(CandidateKind kind);

}  // namespace yonder::punch
