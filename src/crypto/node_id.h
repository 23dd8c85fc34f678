// The node id people read aloud and compare: the node's Ed25519 public key in
// Crockford-style base32, with a check character after every 13 data
// characters, shown in 8 groups of 7 separated by dashes:
//
//   ABCDEFG-HIJKLMN-...   (56 characters, 63 with dashes)
//
// The id *is* the public key (not a hash of it), so a pinned id is enough to
// verify a peer. The check characters use the Luhn mod N algorithm over the
// 32-symbol alphabet (as Syncthing's device ids do), which catches every
// single-character typo and nearly every swap of two adjacent characters.
// Decoding ignores case, dashes and spaces, and reads O as 0 and I/L as 1,
// the letters people mistake for digits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder {

using PublicKeyBytes = std::array<uint8_t, 32>;

class NodeId {
 public:
  static constexpr size_t kDisplayLength = 63;  // with dashes
  // Bounded: anything longer than this is rejected before parsing.
  static constexpr size_t kMaxInputLength = 128;

  explicit NodeId(const PublicKeyBytes& key) : key_(key) {}

  static Result<NodeId> parse(std::string_view text);

  const PublicKeyBytes& public_key() const { return key_; }
  // The grouped display form; the same everywhere the id is shown.
  std::string to_string() const;
  // The first group only, for compact tables ("ABCDEFG").
  std::string short_form() const { return to_string().substr(0, 7); }

  bool operator==(const NodeId&) const = default;

 private:
  PublicKeyBytes key_;
};

}  // namespace yonder
