// Shared helpers for the mesh tests: fixed identities, advertisements and
// receipts built from a seed, so every test is deterministic.
#pragma once

#include <array>
#include <string>

#include "crypto/identity.h"
#include "mesh/core/advertisement.h"
#include "mesh/core/receipt.h"

namespace yonder::mesh::testing {

inline Identity identity(uint32_t n) {
  std::array<uint8_t, 32> seed{};
  for (size_t i = 0; i < 4; ++i) seed[i] = static_cast<uint8_t>(n >> (8 * i));
  seed[31] = 0x5e;
  return Identity::from_seed(ByteView(seed.data(), seed.size())).value();
}

inline GpuOffer gpu(std::string model, uint64_t gib, uint32_t major, uint32_t minor, bool leased = false) {
  GpuOffer g;
  g.model = std::move(model);
  g.memory_bytes = gib << 30;
  g.cuda_major = major;
  g.cuda_minor = minor;
  g.driver = "550.54.14";
  g.leased = leased;
  return g;
}

inline Advertisement sample_ad(const Identity& id, UnixMs now_ms) {
  Advertisement ad;
  ad.gpus = {gpu("NVIDIA GeForce RTX 4090", 24, 8, 9), gpu("NVIDIA GeForce RTX 4090", 24, 8, 9, true)};
  ad.queue_depth = 2;
  ad.backends = {"docker"};
  ad.labels = {{"site", "lab2"}, {"gpu", "rtx4090"}};
  ad.issued_at_ms = now_ms;
  ad.expires_at_ms = now_ms + 60'000;
  sign_advertisement(ad, id);
  return ad;
}

inline std::string hash_of(uint32_t n) {
  std::string h(64, '0');
  std::string s = std::to_string(n);
  h.replace(64 - s.size(), s.size(), s);
  return h;
}

inline Receipt receipt(const Identity& provider, const Identity& consumer, std::string job, uint64_t gpu_seconds,
                       UnixMs end_ms, std::string model = "NVIDIA GeForce RTX 4090") {
  Receipt r;
  r.job_id = std::move(job);
  r.consumer = consumer.public_key();
  r.gpu_model = std::move(model);
  r.gpu_seconds = gpu_seconds;
  r.start_ms = end_ms - static_cast<UnixMs>(gpu_seconds) * 1000;
  if (r.start_ms < 0) r.start_ms = 0;
  r.end_ms = end_ms;
  r.exit_status = 0;
  r.output_hash = hash_of(7);
  sign_receipt_as_provider(r, provider);
  if (!countersign_receipt(r, consumer).ok()) std::abort();
  return r;
}

}  // namespace yonder::mesh::testing
