// LAN discovery announcements: what a node multicasts so that its paired
// peers on the same network find it, and nobody else learns who it is.
//
// The exchange: a node multicasts one datagram to 239.255.77.77:47777
// (IPv4 local scope, RFC 2365; TTL 1) when it starts, again a second later,
// then about every 30 s. The datagram says "a node listens for peer links on
// port P" and carries one tag per paired peer. A tag is a MAC that only the
// two nodes of one pair can compute: HMAC-SHA256 under the key the pair
// shares (pair_key.h), over the announcer's public key and the datagram's
// header (port and a fresh random nonce included), cut to 16 bytes. A
// listener tries the key of each of its paired peers; a match names the
// announcer, and the datagram's source address plus P is a candidate path.
// A "query" flag asks paired peers that hear it to announce at once, so a
// node that starts learns of those already there within a round trip.
//
// Wire format (big endian), at most 25 + 64 * 16 = 1049 bytes:
//
//   0   4  magic "YLAN"
//   4   1  version (1)
//   5   1  flags (bit 0: query; other bits reserved, sent as 0, ignored)
//   6   2  link port (1..65535)
//   8  16  nonce (random per datagram)
//   24  1  tag count n (1..64)
//   25 16n tags
//
// The header the tags cover is bytes 0..24, the count included, so a tag
// cannot be moved to another datagram. Untrusted input: decode_announcement
// is the one parser, bounded and strict; fuzz/lan_announcement_fuzz.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/node_id.h"

namespace yonder::discovery {

inline constexpr char kMulticastGroup[] = "239.255.77.77";
inline constexpr uint16_t kDefaultPort = 47777;

inline constexpr uint8_t kVersion = 1;
inline constexpr uint8_t kFlagQuery = 0x01;
inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kTagSize = 16;
inline constexpr size_t kMaxTags = 64;
inline constexpr size_t kHeaderSize = 25;
inline constexpr size_t kMaxAnnouncementSize = kHeaderSize + kMaxTags * kTagSize;

// The secret two paired nodes share for discovery (pair_key.h).
using PairKey = std::array<uint8_t, 32>;
using Tag = std::array<uint8_t, kTagSize>;
using Nonce = std::array<uint8_t, kNonceSize>;

struct Announcement {
  uint8_t flags = 0;
  uint16_t link_port = 0;
  Nonce nonce{};
  std::vector<Tag> tags;  // 1..kMaxTags

  bool query() const { return (flags & kFlagQuery) != 0; }
};

// Parses one datagram. Refuses (kInvalidArgument) anything that is not
// exactly one well-formed version-1 announcement: other magic or version,
// a size that does not match the tag count, no tags, port 0, more than
// kMaxAnnouncementSize bytes.
Result<Announcement> decode_announcement(ByteView datagram);

// The datagram for `a`; `a` must have 1..kMaxTags tags and a port.
Bytes encode_announcement(const Announcement& a);

// The tag that tells the holder of `key` that the node whose public key is
// `announcer` sent `a` (a's tags play no part).
Tag announcement_tag(const PairKey& key, const PublicKeyBytes& announcer, const Announcement& a);

// Constant-time comparison of two tags.
bool tags_equal(const Tag& a, const Tag& b);

}  // namespace yonder::discovery
