// Advertisement: what a provider offers its peers, signed, with a freshness
// window. A provider pushes a fresh one to its peers (every ~30 s, or when a
// lease changes its free devices); a consumer keeps the newest verified one
// per provider and feeds them to placement (placement.h).
//
// Wire form: one JSON object, at most kMaxAdvertisementBytes:
//   {"provider": "<node id>", "gpus": [{"model", "memory_bytes", "cuda_major",
//    "cuda_minor", "driver", "leased"}], "queue_depth", "backends": [..],
//    "labels": {k: v}, "issued_at_ms", "expires_at_ms", "sig": "<base64>"}
// The signature is Ed25519 by the provider over
//   "yonder-mesh-advertisement-v1\n" + canonical JSON of every field but "sig"
// (nlohmann's dump: sorted keys, no spaces). Untrusted input: decode is
// bounded and never throws; fuzz/advertisement_fuzz.cpp.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

inline constexpr size_t kMaxAdvertisementBytes = 32 * 1024;
inline constexpr size_t kMaxGpusPerProvider = 64;
inline constexpr size_t kMaxBackends = 8;
// An advertisement may claim freshness for at most this long.
inline constexpr UnixMs kMaxAdvertisementTtlMs = 60 * 60 * 1000;
// Clock skew tolerated between provider and consumer.
inline constexpr UnixMs kMaxClockSkewMs = 60 * 1000;

struct GpuOffer {
  std::string model;          // "NVIDIA RTX 4090", 1..64 printable
  uint64_t memory_bytes = 0;  // total device memory
  uint32_t cuda_major = 0;    // compute capability, 0..99
  uint32_t cuda_minor = 0;    // 0..99
  std::string driver;         // "550.54.14", 0..32 printable
  bool leased = false;        // held by a lease (or used outside Yonder)

  // Capability as one comparable number: 8.6 -> 806.
  uint32_t capability() const { return cuda_major * 100 + cuda_minor; }
  bool operator==(const GpuOffer&) const = default;
};

struct Advertisement {
  PeerKey provider{};
  std::vector<GpuOffer> gpus;                 // device index = position
  uint32_t queue_depth = 0;                   // jobs waiting at the provider, 0..1,000,000
  std::vector<std::string> backends;          // "docker", "slurm"; order kept
  std::map<std::string, std::string> labels;  // "site" -> "lab2"
  UnixMs issued_at_ms = 0;
  UnixMs expires_at_ms = 0;
  Bytes signature;  // 64 bytes; empty until signed

  bool operator==(const Advertisement&) const = default;
};

Result<Advertisement> decode_advertisement(std::string_view text);
std::string encode_advertisement(const Advertisement& ad);
// What the provider signs.
Bytes advertisement_signing_bytes(const Advertisement& ad);
// Sets ad.provider to the identity's key and signs.
void sign_advertisement(Advertisement& ad, const Identity& provider);
// Signature valid (kPermissionDenied otherwise) and the window sane
// (issued before expiry, at most kMaxAdvertisementTtlMs long).
Status verify_advertisement(const Advertisement& ad);
// Fresh at `now_ms`: issued no later than now + skew, not yet expired.
bool advertisement_fresh(const Advertisement& ad, UnixMs now_ms);

}  // namespace yonder::mesh
