// Metering receipt: the record of one finished job, signed by the provider
// and countersigned by the consumer; both keep it. Credits (ledger.h) and
// reputation (reputation.h) count only receipts whose two signatures verify.
//
// Wire form: one JSON object, at most kMaxReceiptBytes:
//   {"job", "provider", "consumer", "gpu_model", "gpu_seconds", "start_ms",
//    "end_ms", "exit_status", "output_hash": "<64 hex sha256>",
//    "provider_sig", "consumer_sig"}
// provider_sig: Ed25519 by the provider over
//   "yonder-mesh-receipt-v1\n" + canonical JSON of the fields without sigs;
// consumer_sig: by the consumer over
//   "yonder-mesh-receipt-countersign-v1\n" + the same JSON + provider_sig,
// so a countersignature cannot be moved to another provider signature.
// "consumer_sig" may be absent (a receipt on its way to be countersigned).
//
// The consumer countersigns only what it saw itself (metering.h). When the
// provider claims more than that, the consumer countersigns its own figures
// beside the provider's, which it cannot change (the provider signed them):
//   "consumer_view": {"gpu_seconds", "start_ms", "end_ms"}
// start and end on the consumer's clock (its submit, the end it saw). Then
// consumer_sig is over "yonder-mesh-receipt-countersign-v2\n" + the JSON
// with "consumer_view" + provider_sig, and what counts (credits,
// reputation) is credited_gpu_seconds(): the smaller of the two figures.
// Untrusted input: fuzz/receipt_fuzz.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

inline constexpr size_t kMaxReceiptBytes = 4096;
inline constexpr uint64_t kMaxReceiptGpuSeconds = 64ull * 366 * 24 * 3600;  // 64 GPUs for a year

// What the consumer saw of the job when it countersigned less than claimed.
struct ConsumerView {
  uint64_t gpu_seconds = 0;  // <= the receipt's gpu_seconds
  UnixMs start_ms = 0;       // the consumer's clock
  UnixMs end_ms = 0;         // >= start_ms

  bool operator==(const ConsumerView&) const = default;
};

struct Receipt {
  std::string job_id;  // the provider's job id, 1..64 of [A-Za-z0-9._:/-]
  PeerKey provider{};
  PeerKey consumer{};
  std::string gpu_model;     // as advertised, 1..64 printable
  uint64_t gpu_seconds = 0;  // devices x wall seconds
  UnixMs start_ms = 0;
  UnixMs end_ms = 0;        // >= start_ms
  int32_t exit_status = 0;  // the job's exit code, or 128+signal
  // 64 lower-case hex: the job's outputs, its stdout and stderr and the
  // workspace files it created or changed (jobs/provider/job_log.h
  // output_sha256, jobs/provider/workspace_digest.h): equal runs, equal hashes.
  std::string output_hash;
  Bytes provider_signature;
  // Set by the consumer only (covered by its signature, not the provider's).
  std::optional<ConsumerView> consumer_view;
  Bytes consumer_signature;  // empty until countersigned

  bool operator==(const Receipt&) const = default;
};

Result<Receipt> decode_receipt(std::string_view text);
std::string encode_receipt(const Receipt& r);

// The GPU-seconds both parties vouch for: the consumer's figure when it
// countersigned its own view, the provider's otherwise.
uint64_t credited_gpu_seconds(const Receipt& r);

// Sets r.provider and signs; clears any countersignature (and consumer view).
void sign_receipt_as_provider(Receipt& r, const Identity& provider);
// Checks the provider's signature, then countersigns as r.consumer (with
// r.consumer_view, when set: it must not exceed the claim). Refuses
// (kPermissionDenied) a receipt for another consumer or with a bad signature.
Status countersign_receipt(Receipt& r, const Identity& consumer);
bool receipt_provider_signature_valid(const Receipt& r);
// Both signatures verify and the fields are consistent (end >= start,
// provider != consumer).
Status verify_receipt(const Receipt& r);

}  // namespace yonder::mesh
