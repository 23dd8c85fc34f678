// The discovery key two paired nodes share, derived from their identities
// alone, so pairing needs no extra step and nothing new is stored.
//
// Each side converts its Ed25519 key pair to X25519 (libsodium's
// crypto_sign_ed25519_*_to_curve25519, the birational map of RFC 7748
// section 4.1), does X25519 with the other's public key, and hashes:
//
//   key = SHA-256("yonder-lan-pair-v1" || X25519(a, B) || min(A, B) || max(A, B))
//
// with A, B the Ed25519 public keys in byte order, so both sides get the same
// key. Only the two private keys can make it; someone who merely knows a
// node id (from a share link, say) cannot. The label keeps it apart from any
// other use of the same keys.
#pragma once

#include "base/error.h"
#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "discovery/announcement.h"

namespace yonder::discovery {

// kInvalidArgument for a peer key that is not a usable curve point (small
// order, or the node's own key).
Result<PairKey> derive_pair_key(const Identity& self, const PublicKeyBytes& peer);

}  // namespace yonder::discovery
