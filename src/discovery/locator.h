// Where a node is now, for its paired peers only, kept in a DHT
// (discovery.dht, opt-in): when every address a peer knows fails (its
// provider's public address changed, its home router was replaced), the
// peer looks the node up there. Sans-I/O: the record, its sealing, where it
// is stored, and when to publish and look up; the DHT itself is dht_node.h
// and the node's use of it net/reach/dht_paths.h.
//
// One record per paired peer, sealed under the key the pair shares
// (pair_key.h: X25519 of the two identities, so nothing is exchanged or
// stored for it):
//
//   location  = SHA-256("yonder-locator-where-v1" || pair key || publisher's key || UTC day)[:20]
//   seal key  = SHA-256("yonder-locator-seal-v1" || pair key)
//   value     = nonce (24 random bytes) || XChaCha20-Poly1305(seal key, nonce, record, ad = "YLOC")
//   record    = "YLOC" | version 1 | publisher's key (32) | issued_at (8, unix s)
//               | n addresses (1) | each: length (1) + "HOST:PORT"
//               | n relays (1)    | each: length (1) + "HOST:PORT@NODE_ID"
//               | Ed25519 signature (64) by the publisher over everything before it
//
// So the DHT and whoever watches it see 20-byte locations that change every
// day and differ per pair, and ciphertext: not who publishes, for whom, or
// where they are. Only the two nodes of a pair can compute the location or
// open the value; the signature says which of the two wrote it. A node
// stops publishing for a peer it denies, so that peer learns nothing new.
//
// Bounds: at most kMaxLocatorAddresses addresses and kMaxLocatorRelays
// relays, each at most 255 bytes of printable ASCII; a value at most
// kMaxLocatorValueBytes. open_locator is the one parser of untrusted bytes:
// bounded, strict, fuzzed (fuzz/locator_fuzz.cpp). Errors name what was
// wrong.
//
// Never touches a socket, a clock or a thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "crypto/node_id.h"
#include "discovery/announcement.h"

namespace yonder::discovery {

inline constexpr size_t kMaxLocatorAddresses = 8;
inline constexpr size_t kMaxLocatorRelays = 4;
inline constexpr size_t kMaxLocatorValueBytes = 24 + 16 + 4 + 1 + 32 + 8 + 2 + 12 * 256 + 64;
// Records from further ahead than this (a clock far off) are refused.
inline constexpr std::chrono::minutes kLocatorClockSlack{10};

using LocatorLocation = std::array<uint8_t, 20>;
using LocatorNonce = std::array<uint8_t, 24>;

struct LocatorRecord {
  PublicKeyBytes publisher{};
  int64_t issued_at = 0;                // unix seconds
  std::vector<std::string> addresses;  // "HOST:PORT", where the publisher's link listens
  std::vector<std::string> relays;     // "HOST:PORT@NODE_ID", relays it is registered with
  bool operator==(const LocatorRecord&) const = default;
};

// The UTC day number of a unix time.
int64_t locator_day(int64_t unix_seconds);
LocatorLocation locator_location(const PairKey& pair, const PublicKeyBytes& publisher, int64_t day);

// Seals `record` for the peer `pair` is shared with. Aborts on a broken
// invariant (too many or too long entries, a publisher that is not `self`):
// the caller builds the record. The nonce is the caller's (random).
Bytes seal_locator(const Identity& self, const PairKey& pair, const LocatorRecord& record, const LocatorNonce& nonce);
// Opens a value found at the location of (pair, publisher): kDataLoss for
// anything that does not decrypt, parse or verify as `publisher`'s record.
Result<LocatorRecord> open_locator(const PairKey& pair, const PublicKeyBytes& publisher, ByteView value);
// The record inside a value, once decrypted (open_locator's second half;
// public for the fuzzer, which cannot get past the AEAD tag).
Result<LocatorRecord> read_locator_record(const PublicKeyBytes& publisher, ByteView plain);

// Whether a record found now replaces the one held (newer, and not from the
// future beyond the slack). `held`: issued_at of the record last used.
bool locator_is_newer(std::optional<int64_t> held, const LocatorRecord& found, int64_t now_unix);

// When to publish: the record's content changed, the day changed (a new
// location), or kRepublishEvery passed (DHT values expire).
inline constexpr std::chrono::minutes kRepublishEvery{10};
struct PublishState {
  std::optional<std::chrono::steady_clock::time_point> last;  // never: publish
  int64_t last_day = 0;
  std::vector<std::string> last_addresses, last_relays;
};
bool publish_due(const PublishState& s, std::chrono::steady_clock::time_point now, int64_t day,
                 const std::vector<std::string>& addresses, const std::vector<std::string>& relays);

// When to look a peer up: it has been unreachable for kLookupAfterDown
// (every address we know failed meanwhile: the link redials them on its
// own first) and the last lookup is kLookupEvery old.
inline constexpr std::chrono::seconds kLookupAfterDown{5};
inline constexpr std::chrono::seconds kLookupEvery{15};
struct LookupState {
  std::optional<std::chrono::steady_clock::time_point> down_since;  // unset: connected
  std::optional<std::chrono::steady_clock::time_point> last_lookup;
  bool running = false;
};
bool lookup_due(const LookupState& s, std::chrono::steady_clock::time_point now);

}  // namespace yonder::discovery
