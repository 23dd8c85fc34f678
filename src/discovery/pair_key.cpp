#include "discovery/pair_key.h"

#include <sodium.h>

#include <algorithm>
#include <string_view>

namespace yonder::discovery {

namespace {

// Wipes the secrets it holds when it goes out of scope, whichever way.
template <size_t N>
struct Secret {
  std::array<uint8_t, N> b{};
  ~Secret() { sodium_memzero(b.data(), b.size()); }
};

}  // namespace

Result<PairKey> derive_pair_key(const Identity& self, const PublicKeyBytes& peer) {
  if (sodium_init() < 0) return make_error(ErrorCode::kInternal, "libsodium failed to initialise");
  if (peer == self.public_key()) {
    return make_error(ErrorCode::kInvalidArgument, "a node cannot be its own peer for LAN discovery");
  }
  std::array<uint8_t, crypto_sign_PUBLICKEYBYTES> own_pk{};
  Secret<crypto_sign_SECRETKEYBYTES> ed_sk;
  Secret<crypto_scalarmult_curve25519_BYTES> x_sk, shared;
  std::array<uint8_t, crypto_scalarmult_curve25519_BYTES> x_peer{};
  crypto_sign_seed_keypair(own_pk.data(), ed_sk.b.data(), self.seed().data());
  crypto_sign_ed25519_sk_to_curve25519(x_sk.b.data(), ed_sk.b.data());
  if (crypto_sign_ed25519_pk_to_curve25519(x_peer.data(), peer.data()) != 0 ||
      crypto_scalarmult_curve25519(shared.b.data(), x_sk.b.data(), x_peer.data()) != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the peer's key is not a usable Ed25519 public key; re-pair with that peer");
  }
  constexpr std::string_view kLabel = "yonder-lan-pair-v1";
  const PublicKeyBytes& lo = std::min(self.public_key(), peer);
  const PublicKeyBytes& hi = std::max(self.public_key(), peer);
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, reinterpret_cast<const uint8_t*>(kLabel.data()), kLabel.size());
  crypto_hash_sha256_update(&st, shared.b.data(), shared.b.size());
  crypto_hash_sha256_update(&st, lo.data(), lo.size());
  crypto_hash_sha256_update(&st, hi.data(), hi.size());
  PairKey key{};
  crypto_hash_sha256_final(&st, key.data());
  sodium_memzero(&st, sizeof st);
  return key;
}

}  // namespace yonder::discovery
