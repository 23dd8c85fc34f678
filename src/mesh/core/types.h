// Vocabulary shared by the mesh core: who (PeerKey), when (UnixMs).
//
// The mesh core does no I/O and reads no clock: every entry point that needs
// the time takes `now_ms` (milliseconds since the Unix epoch, wall clock).
#pragma once

#include <cstdint>

#include "crypto/node_id.h"

namespace yonder::mesh {

// A peer's Ed25519 public key; ordered, so it keys maps and breaks ties.
using PeerKey = PublicKeyBytes;

// Milliseconds since the Unix epoch.
using UnixMs = int64_t;

// Every time a peer sends is bounded by this (year 2255); larger is refused.
inline constexpr UnixMs kMaxUnixMs = int64_t{1} << 43;

}  // namespace yonder::mesh
