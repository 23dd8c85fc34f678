// The node's Ed25519 identity: key pair, signing, and the key file at rest.
//
// Key file format (text, one "name: value" per line, at most 4 KiB):
//
//   yonder-identity v1
//   public: <base64 32-byte Ed25519 public key>
//   kdf: none | argon2id
//   kdf-ops: <n>        (argon2id only)
//   kdf-mem: <bytes>    (argon2id only)
//   salt: <base64 16>   (argon2id only)
//   nonce: <base64 24>  (argon2id only)
//   secret: <base64 seed (32) | XChaCha20-Poly1305 ciphertext of it (48)>
//
// The public key is stored in the clear so the node id can be shown without
// the passphrase; after decryption the derived public key must match it. The
// public key and kdf parameters are bound into the AEAD as associated data, so
// editing any of them makes decryption fail instead of yielding another key.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/node_id.h"

namespace yonder {

// An Ed25519 private key held in memory. Move-only; wipes the seed on destruction.
class Identity {
 public:
  static Result<Identity> generate();
  static Result<Identity> from_seed(ByteView seed32);

  Identity(Identity&&) noexcept;
  Identity& operator=(Identity&&) noexcept;
  ~Identity();

  NodeId node_id() const { return NodeId(public_key_); }
  const PublicKeyBytes& public_key() const { return public_key_; }
  // The raw 32-byte seed; handle with care (only the key file writer uses it).
  ByteView seed() const { return {seed_.data(), seed_.size()}; }

  Bytes sign(ByteView message) const;

 private:
  Identity() = default;
  std::array<uint8_t, 32> seed_{};
  PublicKeyBytes public_key_{};
};

bool verify_signature(const PublicKeyBytes& key, ByteView message, ByteView signature);

// Cost of the passphrase key derivation. kModerate is the default for people
// (about a second, 256 MiB); kInteractive exists so tests stay fast.
enum class KdfStrength { kInteractive, kModerate };

struct KeyFile {
  PublicKeyBytes public_key{};
  bool encrypted = false;
  // Parsed fields; meaning depends on `encrypted`.
  uint64_t kdf_ops = 0;
  uint64_t kdf_mem = 0;
  Bytes salt;
  Bytes nonce;
  Bytes secret;
};

constexpr size_t kMaxKeyFileSize = 4096;

// Parses the text form. Untrusted input: bounded, never throws.
Result<KeyFile> parse_key_file(std::string_view text);

// Serialises `identity`; with a passphrase the seed is encrypted.
Result<std::string> encode_key_file(const Identity& identity, const std::optional<std::string>& passphrase,
                                    KdfStrength strength = KdfStrength::kModerate);

// Recovers the identity. An encrypted file without a passphrase, or with the
// wrong one, is a clear kPermissionDenied error.
Result<Identity> open_key_file(const KeyFile& file, const std::optional<std::string>& passphrase);

// File helpers: write creates the file 0600 (refusing to replace an existing
// one) and fsyncs it; read refuses a file that group or others can access.
Status write_key_file(const std::string& path, const std::string& contents);
Result<std::string> read_key_file(const std::string& path);
// Just the permission check, for `yonder doctor`.
Status check_key_file_permissions(const std::string& path);

}  // namespace yonder
