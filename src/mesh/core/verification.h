// Verification outcomes and the opinions a node shares with its peers:
// what reputation (reputation.h) is computed from, besides receipts.
//
// A verification is one check a consumer (the reporter) made of a provider:
// a replica compared with the others (`replica`: agreed | outvoted, see
// quorum.h), a known-answer benchmark (`known_answer`: passed | failed), or
// a receipt the provider signed that disagrees with what the reporter saw
// of the job (`receipt`: disputed, see metering.h; subject: the job id).
// The reporter signs it, so a peer that passes it on cannot change it.
//
// Wire form of one verification: a JSON object, at most kMaxVerificationBytes:
//   {"v": 1, "reporter", "provider", "kind": "replica"|"known_answer"|"receipt",
//    "subject": "<mesh job id or benchmark id>",
//    "outcome": "agreed"|"outvoted"|"passed"|"failed", "at_ms",
//    "details": "<a JSON object as text, at most 1 KiB>", "sig"}
// sig: Ed25519 by the reporter over
//   "yonder-mesh-verification-v1\n" + canonical JSON of the fields without "sig".
// "details" is informational (seconds, rate, GPU model, the quorum's hash)
// and signed as text: the canonical form never depends on how a peer
// formats numbers inside it.
//
// Opinions: what one node answers `mesh.opinions` with, its own evidence:
//   {"v": 1, "receipts": ["<receipt JSON>", ...], "verifications": ["<verification JSON>", ...]}
// at most kMaxOpinionItems of each and kMaxOpinionsBytes in all. The
// fetcher keeps only what verified_opinions() lets through: receipts whose
// two signatures verify and that name the sender as a party, verifications
// signed by the sender about another peer.
//
// Untrusted input: fuzz/verification_fuzz.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "mesh/core/receipt.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

inline constexpr size_t kMaxVerificationBytes = 4096;
inline constexpr size_t kMaxVerificationDetailsBytes = 1024;
inline constexpr size_t kMaxOpinionItems = 256;
// Under the link's 256 KiB message with room for the reply's own escaping.
inline constexpr size_t kMaxOpinionsBytes = 192 * 1024;

enum class CheckKind { kReplica, kKnownAnswer, kReceipt };
enum class CheckOutcome { kAgreed, kOutvoted, kPassed, kFailed, kDisputed };

const char* check_kind_name(CheckKind k);
const char* check_outcome_name(CheckOutcome o);
std::optional<CheckKind> parse_check_kind(std::string_view s);
std::optional<CheckOutcome> parse_check_outcome(std::string_view s);
// replica: agreed | outvoted; known_answer: passed | failed; receipt: disputed.
bool outcome_fits(CheckKind k, CheckOutcome o);
// agreed or passed.
inline bool outcome_good(CheckOutcome o) {
  return o == CheckOutcome::kAgreed || o == CheckOutcome::kPassed;
}

struct Verification {
  PeerKey reporter{};
  PeerKey provider{};
  CheckKind kind = CheckKind::kReplica;
  std::string subject;  // 1..64 of [A-Za-z0-9._:/-]
  CheckOutcome outcome = CheckOutcome::kAgreed;
  UnixMs at_ms = 0;
  std::string details = "{}";  // printable, at most kMaxVerificationDetailsBytes
  Bytes signature;

  bool operator==(const Verification&) const = default;
};

Result<Verification> decode_verification(std::string_view text);
std::string encode_verification(const Verification& v);
// Sets v.reporter and signs.
void sign_verification(Verification& v, const Identity& reporter);
// The reporter's signature verifies and the fields are consistent
// (reporter != provider, the outcome fits the kind).
Status verify_verification(const Verification& v);

struct Opinions {
  std::vector<Receipt> receipts;
  std::vector<Verification> verifications;
  size_t dropped = 0;  // items that did not decode (decode) or verify (verified_opinions)
};

// Items that do not decode are dropped (counted), not fatal; the envelope
// must be well formed and within the bounds.
Result<Opinions> decode_opinions(std::string_view text);
// Encodes at most kMaxOpinionItems of each, keeping the total under
// kMaxOpinionsBytes (the first ones in each list: pass the newest first).
std::string encode_opinions(const Opinions& o);
// What a node may believe of `sender`'s opinions (see above).
Opinions verified_opinions(Opinions o, const PeerKey& sender);

}  // namespace yonder::mesh
