// What yonderd nodes tell each other in relay signals (protocol.h: opaque
// to the relay, at most kMaxSignalBytes, only between mutual peers): a
// better path to try. Today one kind, a port the sender mapped on its
// router (UPnP-IGD or NAT-PMP), which the receiver dials to move a relayed
// link there; the pinned TLS handshake decides whether it is really the peer.
//
//   {"v": 1, "mapped": "203.0.113.2:7850"}
//
// Untrusted input: bounded, every field checked, unknown fields ignored.
#pragma once

#include <optional>
#include <string>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::relay {

struct PathHint {
  std::optional<std::string> mapped;  // IPv4 "a.b.c.d:port" the sender's router forwards to it
};

Bytes encode_path_hint(const PathHint& hint);
Result<PathHint> decode_path_hint(ByteView bytes);

}  // namespace yonder::relay
