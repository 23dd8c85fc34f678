// Share links: what `yonder share` prints and `yonder pair` consumes.
//
//   yonder://<base64url, no padding, of the binary payload below>
//
// Payload (big-endian integers), at most kMaxLinkBytes (the worst case
// within the bounds below is 1012 bytes, so every link that passes them fits):
//   u8   version (2; the decoder also reads 1, see below)
//   32   provider's Ed25519 public key (its node id)
//   16   link id (random; names the link in `yonder links`)
//   32   one-time secret (the provider stores only its SHA-256)
//   i64  expires_at, unix seconds
//   u16  uses (how many pairings the link allows; informational for the holder)
//   scope: u8 capabilities, u8 flags (bit 0: egress), u16 gpus, u64 vram,
//          u32 max_time_s, u16 max_jobs, u32 cpus_milli, u64 memory, u64 disk
//   u8   address count (<= 8), each: u8 length (<= 80) + "host:port" ASCII
//   u8   relay count (<= 4; with the addresses at most 8), each:
//          u8 length (<= 74) + "host:port" ASCII, 32 the relay's Ed25519 key
//   u8   name length (<= 64) + provider's name (UTF-8)
//   64   Ed25519 signature over "yonder-share-link-v2" || every byte above
//
// Version 1 (still decoded, never written) has no relay list: its relays are
// address entries "relay:host:port" (<= 74 after the prefix) without a key,
// and its signature's label is "yonder-share-link-v1". The holder uses such
// a relay only when its own link.relays pins that address (LinkRelay::key
// stays empty). Why v2 carries the key: the holder connects to a relay it
// learned from a stranger's link, and without a key anyone who can take
// that address (DNS, a reused IP) would be the relay it registers with.
//
// The holder verifies the signature and expiry before dialling; the provider
// checks them again, plus the secret, uses left and revocation, before it
// pins the holder's key. The link is a bearer secret: whoever holds it first
// can pair, so it is short-lived and single-use by default.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "crypto/scope.h"

namespace yonder {

using LinkIdBytes = std::array<uint8_t, 16>;
using LinkSecret = std::array<uint8_t, 32>;

// One of the provider's relays as a link carries it.
struct LinkRelay {
  std::string address;                // "host:port" or "[v6]:port"
  std::optional<PublicKeyBytes> key;  // the relay's Ed25519 key (its node id); empty from a v1 link

  // "host:port@NODE_ID", or "host:port" without a key: the form of a
  // link.relays item and, after "relay:", of a peer's stored relay address.
  std::string text() const;
  bool operator==(const LinkRelay&) const = default;
};

// Parses LinkRelay::text()'s form (the one parser of that form: the daemon's
// stored peer addresses and the provider's link.relays both use it).
Result<LinkRelay> parse_link_relay(std::string_view text);

// The entry a consumer stores among a provider's addresses for one of its
// relays: "relay:" + text(). The link layer dials no such entry itself.
constexpr std::string_view kRelayAddressPrefix = "relay:";
std::string relay_peer_address(const LinkRelay& relay);
// The relay named by a stored address, or nothing when the address is a
// direct one (no "relay:" prefix). A malformed relay entry is an error.
Result<std::optional<LinkRelay>> relay_of_peer_address(std::string_view address);

struct ShareLink {
  PublicKeyBytes provider_key{};
  LinkIdBytes id{};
  LinkSecret secret{};
  int64_t expires_at = 0;
  uint16_t uses = 1;
  Scope scope;
  std::vector<std::string> addresses;  // "host:port", "[v6]:port"
  std::vector<LinkRelay> relays;       // the provider's relays (at most 4; with addresses at most 8)
  uint8_t version = 2;                 // the format it was decoded from (encode always writes 2)
  std::string provider_name;

  std::string id_text() const;  // 32 hex digits
  NodeId provider() const { return NodeId(provider_key); }
};

constexpr size_t kMaxLinkBytes = 1024;
constexpr std::string_view kLinkScheme = "yonder://";

// Signs and encodes (format v2). Addresses, relays and names beyond the
// format's bounds are errors, and so is a relay without a key: the provider
// leaves out the relays whose key it does not know.
Result<std::string> encode_share_link(const ShareLink& link, const Identity& provider);

// Decodes and verifies the signature (not the expiry: see check_link_expiry).
// Each failure has its own message: not a link, truncated, tampered, unknown version.
Result<ShareLink> decode_share_link(std::string_view text);

// kFailedPrecondition "expired" when now >= expires_at.
Status check_link_expiry(const ShareLink& link, TimePoint now);

// SHA-256 of the secret, as stored by the provider.
Bytes hash_link_secret(const LinkSecret& secret);

// The token a provider registers with its relays while the link can pair
// (relay/protocol.h, rendezvous): SHA-256 over a label, the link id and the
// secret's hash, so both the provider (who keeps only the hash) and the
// holder can compute it, and the relay cannot learn the secret from it.
std::array<uint8_t, 32> link_rendezvous_token(const LinkIdBytes& id, ByteView secret_hash);

// Parses a link id as printed by `yonder links` (32 hex digits).
Result<LinkIdBytes> parse_link_id(std::string_view text);

}  // namespace yonder
