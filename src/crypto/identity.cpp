#include "crypto/identity.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace yonder {
namespace {

constexpr std::string_view kHeader = "yonder-identity v1";

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

Status sodium_ready() {
  if (sodium_init() < 0) return make_error(ErrorCode::kInternal, "libsodium failed to initialise");
  return ok_status();
}

std::string errno_text() { return std::strerror(errno); }

// Associated data for the AEAD: everything in the file but the ciphertext.
std::string associated_data(const KeyFile& f) {
  return std::string(kHeader) + "|" + base64_encode(f.public_key) + "|argon2id|" + std::to_string(f.kdf_ops) + "|" +
         std::to_string(f.kdf_mem) + "|" + base64_encode(f.salt) + "|" + base64_encode(f.nonce);
}

Result<Bytes> derive_key(const std::string& passphrase, const KeyFile& f) {
  Bytes key(crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
  if (f.kdf_ops < crypto_pwhash_OPSLIMIT_MIN || f.kdf_ops > 64 || f.kdf_mem < crypto_pwhash_MEMLIMIT_MIN ||
      f.kdf_mem > (size_t{4} << 30) || f.salt.size() != crypto_pwhash_SALTBYTES) {
    return make_error(ErrorCode::kDataLoss, "key file has out-of-range key derivation parameters; it may be damaged");
  }
  if (crypto_pwhash(key.data(), key.size(), passphrase.data(), passphrase.size(), f.salt.data(), f.kdf_ops,
                    static_cast<size_t>(f.kdf_mem), crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return make_error(ErrorCode::kResourceExhausted,
                      "not enough memory to derive the key from the passphrase (argon2id needs " +
                          std::to_string(f.kdf_mem >> 20) + " MiB)");
  }
  return key;
}

}  // namespace

Result<Identity> Identity::generate() {
  YONDER_TRY(sodium_ready());
  std::array<uint8_t, 32> seed{};
  randombytes_buf(seed.data(), seed.size());
  auto id = from_seed(seed);
  sodium_memzero(seed.data(), seed.size());
  return id;
}

Result<Identity> Identity::from_seed(ByteView seed32) {
  if (seed32.size() != 32) return make_error(ErrorCode::kInvalidArgument, "an Ed25519 seed has 32 bytes");
  PkeyPtr pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed32.data(), seed32.size()));
  if (!pkey) return make_error(ErrorCode::kInternal, "OpenSSL could not load the Ed25519 key");
  Identity id;
  std::copy(seed32.begin(), seed32.end(), id.seed_.begin());
  size_t len = id.public_key_.size();
  if (EVP_PKEY_get_raw_public_key(pkey.get(), id.public_key_.data(), &len) != 1 || len != 32) {
    return make_error(ErrorCode::kInternal, "OpenSSL could not derive the Ed25519 public key");
  }
  return id;
}

Identity::Identity(Identity&& o) noexcept : seed_(o.seed_), public_key_(o.public_key_) {
  sodium_memzero(o.seed_.data(), o.seed_.size());
}

Identity& Identity::operator=(Identity&& o) noexcept {
  if (this != &o) {
    seed_ = o.seed_;
    public_key_ = o.public_key_;
    sodium_memzero(o.seed_.data(), o.seed_.size());
  }
  return *this;
}

Identity::~Identity() { sodium_memzero(seed_.data(), seed_.size()); }

Bytes Identity::sign(ByteView message) const {
  PkeyPtr pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed_.data(), seed_.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  Bytes sig(64);
  size_t len = sig.size();
  // A valid in-memory key cannot fail to sign: failure is a broken invariant.
  if (!pkey || !ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1) {
    std::abort();
  }
  return sig;
}

bool verify_signature(const PublicKeyBytes& key, ByteView message, ByteView signature) {
  if (signature.size() != 64) return false;
  PkeyPtr pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!pkey || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(), message.size()) == 1;
}

Result<KeyFile> parse_key_file(std::string_view text) {
  auto bad = [](const std::string& why) {
    return make_error(ErrorCode::kDataLoss, "key file is damaged: " + why +
                                                "; restore it from a backup, or move it away and run `yonder init` "
                                                "to create a new identity (peers will need to pair again)");
  };
  if (text.size() > kMaxKeyFileSize) return bad("it is larger than " + std::to_string(kMaxKeyFileSize) + " bytes");
  std::map<std::string, std::string, std::less<>> fields;
  bool first = true;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      if (line != kHeader) return bad("the first line is not \"" + std::string(kHeader) + "\"");
      first = false;
      continue;
    }
    if (line.empty()) continue;
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos) return bad("a line has no \"name: value\" form");
    auto [it, inserted] = fields.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 2)));
    if (!inserted) return bad("the field \"" + it->first + "\" appears twice");
  }
  if (first) return bad("it is empty");
  auto get_b64 = [&](const char* name, size_t size) -> Result<Bytes> {
    auto it = fields.find(name);
    if (it == fields.end()) return bad(std::string("the field \"") + name + "\" is missing");
    auto bytes = base64_decode(it->second);
    if (!bytes || bytes->size() != size) return bad(std::string("the field \"") + name + "\" is not valid");
    return *bytes;
  };
  auto get_u64 = [&](const char* name) -> Result<uint64_t> {
    auto it = fields.find(name);
    if (it == fields.end()) return bad(std::string("the field \"") + name + "\" is missing");
    const std::string& s = it->second;
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) {
      return bad(std::string("the field \"") + name + "\" is not a number");
    }
    return std::stoull(s);
  };
  KeyFile f;
  auto pub = get_b64("public", 32);
  if (!pub) return std::move(pub).error();
  std::copy(pub->begin(), pub->end(), f.public_key.begin());
  auto kdf = fields.find("kdf");
  if (kdf == fields.end()) return bad("the field \"kdf\" is missing");
  if (kdf->second == "none") {
    auto secret = get_b64("secret", 32);
    if (!secret) return std::move(secret).error();
    f.secret = std::move(*secret);
    return f;
  }
  if (kdf->second != "argon2id") return bad("unknown kdf \"" + kdf->second.substr(0, 32) + "\"");
  f.encrypted = true;
  auto ops = get_u64("kdf-ops");
  if (!ops) return std::move(ops).error();
  auto mem = get_u64("kdf-mem");
  if (!mem) return std::move(mem).error();
  f.kdf_ops = *ops;
  f.kdf_mem = *mem;
  auto salt = get_b64("salt", crypto_pwhash_SALTBYTES);
  if (!salt) return std::move(salt).error();
  auto nonce = get_b64("nonce", crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  if (!nonce) return std::move(nonce).error();
  auto secret = get_b64("secret", 32 + crypto_aead_xchacha20poly1305_ietf_ABYTES);
  if (!secret) return std::move(secret).error();
  f.salt = std::move(*salt);
  f.nonce = std::move(*nonce);
  f.secret = std::move(*secret);
  return f;
}

Result<std::string> encode_key_file(const Identity& identity, const std::optional<std::string>& passphrase,
                                    KdfStrength strength) {
  YONDER_TRY(sodium_ready());
  KeyFile f;
  f.public_key = identity.public_key();
  std::string out = std::string(kHeader) + "\npublic: " + base64_encode(f.public_key) + "\n";
  if (!passphrase) {
    return out + "kdf: none\nsecret: " + base64_encode(identity.seed()) + "\n";
  }
  if (passphrase->empty()) {
    return make_error(ErrorCode::kInvalidArgument, "the passphrase is empty; choose one, or init without --passphrase");
  }
  f.encrypted = true;
  bool moderate = strength == KdfStrength::kModerate;
  f.kdf_ops = moderate ? crypto_pwhash_OPSLIMIT_MODERATE : crypto_pwhash_OPSLIMIT_INTERACTIVE;
  f.kdf_mem = moderate ? crypto_pwhash_MEMLIMIT_MODERATE : crypto_pwhash_MEMLIMIT_INTERACTIVE;
  f.salt.resize(crypto_pwhash_SALTBYTES);
  f.nonce.resize(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  randombytes_buf(f.salt.data(), f.salt.size());
  randombytes_buf(f.nonce.data(), f.nonce.size());
  auto key = derive_key(*passphrase, f);
  if (!key) return std::move(key).error();
  std::string ad = associated_data(f);
  Bytes ct(32 + crypto_aead_xchacha20poly1305_ietf_ABYTES);
  unsigned long long ct_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(ct.data(), &ct_len, identity.seed().data(), 32,
                                             reinterpret_cast<const uint8_t*>(ad.data()), ad.size(), nullptr,
                                             f.nonce.data(), key->data());
  sodium_memzero(key->data(), key->size());
  out += "kdf: argon2id\nkdf-ops: " + std::to_string(f.kdf_ops) + "\nkdf-mem: " + std::to_string(f.kdf_mem) +
         "\nsalt: " + base64_encode(f.salt) + "\nnonce: " + base64_encode(f.nonce) + "\nsecret: " + base64_encode(ct) +
         "\n";
  return out;
}

Result<Identity> open_key_file(const KeyFile& f, const std::optional<std::string>& passphrase) {
  YONDER_TRY(sodium_ready());
  auto check = [&](Result<Identity> id) -> Result<Identity> {
    if (!id) return id;
    if (id->public_key() != f.public_key) {
      return make_error(ErrorCode::kDataLoss, "key file is damaged: its public and private keys do not match");
    }
    return id;
  };
  if (!f.encrypted) return check(Identity::from_seed(f.secret));
  if (!passphrase) {
    return make_error(ErrorCode::kPermissionDenied,
                      "the identity key is encrypted: set YONDER_PASSPHRASE (or YONDER_PASSPHRASE_FILE), "
                      "or start yonderd in a terminal to be asked for it");
  }
  auto key = derive_key(*passphrase, f);
  if (!key) return std::move(key).error();
  std::string ad = associated_data(f);
  std::array<uint8_t, 32> seed{};
  unsigned long long seed_len = 0;
  int rc = crypto_aead_xchacha20poly1305_ietf_decrypt(seed.data(), &seed_len, nullptr, f.secret.data(),
                                                      f.secret.size(), reinterpret_cast<const uint8_t*>(ad.data()),
                                                      ad.size(), f.nonce.data(), key->data());
  sodium_memzero(key->data(), key->size());
  if (rc != 0 || seed_len != 32) {
    return make_error(ErrorCode::kPermissionDenied,
                      "wrong passphrase for the identity key (or the key file was altered); try again");
  }
  auto id = check(Identity::from_seed(seed));
  sodium_memzero(seed.data(), seed.size());
  return id;
}

Status write_key_file(const std::string& path, const std::string& contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return make_error(ErrorCode::kAlreadyExists, path + " already exists; refusing to replace an identity");
    }
    return make_error(ErrorCode::kPermissionDenied, "cannot create " + path + ": " + errno_text());
  }
  // O_CREAT's mode is filtered by the umask; make sure it is exactly 0600.
  bool ok = ::fchmod(fd, 0600) == 0;
  size_t off = 0;
  while (ok && off < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok = false;
    else off += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  std::string why = errno_text();
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return make_error(ErrorCode::kResourceExhausted, "could not write " + path + ": " + why);
  }
  return ok_status();
}

Status check_key_file_permissions(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return make_error(ErrorCode::kNotFound, "no identity at " + path + "; run `yonder init` first");
    }
    return make_error(ErrorCode::kPermissionDenied, "cannot read " + path + ": " + errno_text());
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
    return make_error(ErrorCode::kPermissionDenied, "the identity key " + path + " is readable by others (mode " +
                                                        mode + "); fix it with: chmod 600 " + path);
  }
  if (st.st_uid != ::geteuid()) {
    return make_error(ErrorCode::kPermissionDenied,
                      "the identity key " + path + " belongs to another user; fix it with: chown $(id -u) " + path);
  }
  return ok_status();
}

Result<std::string> read_key_file(const std::string& path) {
  YONDER_TRY(check_key_file_permissions(path));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::kPermissionDenied, "cannot open " + path + ": " + errno_text());
  std::string out;
  char buf[1024];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxKeyFileSize) break;
  }
  ::close(fd);
  return out;
}

}  // namespace yonder
