#include "discovery/locator.h"

#include <sodium.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace yonder::discovery {
namespace {

constexpr uint8_t kRecordMagic[4] = {'Y', 'L', 'O', 'C'};
constexpr uint8_t kRecordVersion = 1;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kMaxEntryBytes = 255;

Error record_damaged(const std::string& what) {
  return make_error(ErrorCode::kDataLoss,
                    "a locator record in the DHT that is not the peer's (" + what +
                        "): ignored; the link keeps trying the addresses it knows");
}

std::array<uint8_t, 32> sha256(std::initializer_list<ByteView> parts) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  for (auto p : parts) crypto_hash_sha256_update(&st, p.data(), p.size());
  std::array<uint8_t, 32> out{};
  crypto_hash_sha256_final(&st, out.data());
  return out;
}

ByteView label(std::string_view s) {
  return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::array<uint8_t, 32> seal_key(const PairKey& pair) {
  return sha256({label("yonder-locator-seal-v1"), ByteView(pair.data(), pair.size())});
}

bool printable(const std::string& s) {
  if (s.empty() || s.size() > kMaxEntryBytes) return false;
  for (unsigned char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

void put_u64(Bytes& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (56 - 8 * i)));
}

void put_list(Bytes& out, const std::vector<std::string>& list) {
  out.push_back(static_cast<uint8_t>(list.size()));
  for (const auto& s : list) {
    out.push_back(static_cast<uint8_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
}

class RecordReader {
 public:
  explicit RecordReader(ByteView b) : b_(b) {}
  bool take(size_t n, const uint8_t** out) {
    if (b_.size() - at_ < n) return false;
    *out = b_.data() + at_;
    at_ += n;
    return true;
  }
  bool byte(uint8_t* out) {
    const uint8_t* p = nullptr;
    if (!take(1, &p)) return false;
    *out = *p;
    return true;
  }
  size_t at() const { return at_; }
  size_t left() const { return b_.size() - at_; }

 private:
  ByteView b_;
  size_t at_ = 0;
};

Result<std::vector<std::string>> read_list(RecordReader& r, size_t max, const char* what) {
  uint8_t n = 0;
  if (!r.byte(&n)) return record_damaged("cut short");
  if (n > max) return record_damaged(std::string("more than ") + std::to_string(max) + " " + what);
  std::vector<std::string> out;
  for (uint8_t i = 0; i < n; ++i) {
    uint8_t len = 0;
    const uint8_t* p = nullptr;
    if (!r.byte(&len) || !r.take(len, &p)) return record_damaged(std::string("cut short in ") + what);
    std::string s(reinterpret_cast<const char*>(p), len);
    if (!printable(s)) return record_damaged(std::string("an entry of ") + what + " that is empty or not printable");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

int64_t locator_day(int64_t unix_seconds) {
  int64_t day = unix_seconds / 86400;
  if (unix_seconds < 0 && unix_seconds % 86400 != 0) --day;
  return day;
}

LocatorLocation locator_location(const PairKey& pair, const PublicKeyBytes& publisher, int64_t day) {
  uint8_t d[8];
  for (int i = 0; i < 8; ++i) d[i] = static_cast<uint8_t>(static_cast<uint64_t>(day) >> (56 - 8 * i));
  auto h = sha256({label("yonder-locator-where-v1"), ByteView(pair.data(), pair.size()),
                   ByteView(publisher.data(), publisher.size()), ByteView(d, 8)});
  LocatorLocation out{};
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

Bytes seal_locator(const Identity& self, const PairKey& pair, const LocatorRecord& record, const LocatorNonce& nonce) {
  if (record.publisher != self.public_key() || record.addresses.size() > kMaxLocatorAddresses ||
      record.relays.size() > kMaxLocatorRelays) {
    std::abort();
  }
  for (const auto* list : {&record.addresses, &record.relays}) {
    for (const auto& s : *list) {
      if (!printable(s)) std::abort();
    }
  }
  if (sodium_init() < 0) std::abort();
  Bytes plain(kRecordMagic, kRecordMagic + 4);
  plain.push_back(kRecordVersion);
  plain.insert(plain.end(), record.publisher.begin(), record.publisher.end());
  put_u64(plain, static_cast<uint64_t>(record.issued_at));
  put_list(plain, record.addresses);
  put_list(plain, record.relays);
  Bytes sig = self.sign(plain);
  plain.insert(plain.end(), sig.begin(), sig.end());

  auto key = seal_key(pair);
  Bytes out(nonce.begin(), nonce.end());
  out.resize(nonce.size() + plain.size() + crypto_aead_xchacha20poly1305_ietf_ABYTES);
  unsigned long long written = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(out.data() + nonce.size(), &written, plain.data(), plain.size(), kRecordMagic,
                                             4, nullptr, nonce.data(), key.data());
  sodium_memzero(key.data(), key.size());
  out.resize(nonce.size() + written);
  return out;
}

Result<LocatorRecord> open_locator(const PairKey& pair, const PublicKeyBytes& publisher, ByteView value) {
  if (value.size() > kMaxLocatorValueBytes) return record_damaged("too long");
  if (value.size() < 24 + crypto_aead_xchacha20poly1305_ietf_ABYTES) return record_damaged("too short");
  if (sodium_init() < 0) return make_error(ErrorCode::kInternal, "libsodium failed to initialise");
  auto key = seal_key(pair);
  Bytes plain(value.size() - 24 - crypto_aead_xchacha20poly1305_ietf_ABYTES);
  unsigned long long n = 0;
  int rc = crypto_aead_xchacha20poly1305_ietf_decrypt(plain.data(), &n, nullptr, value.data() + 24, value.size() - 24,
                                                      kRecordMagic, 4, value.data(), key.data());
  sodium_memzero(key.data(), key.size());
  if (rc != 0) return record_damaged("it does not decrypt under the key this pair shares");
  plain.resize(n);
  return read_locator_record(publisher, plain);
}

Result<LocatorRecord> read_locator_record(const PublicKeyBytes& publisher, ByteView plain) {
  RecordReader r(plain);
  const uint8_t* p = nullptr;
  if (!r.take(4, &p) || std::memcmp(p, kRecordMagic, 4) != 0) return record_damaged("no record magic");
  uint8_t version = 0;
  if (!r.byte(&version)) return record_damaged("cut short");
  if (version != kRecordVersion) return record_damaged("record version " + std::to_string(version) + ", this node reads 1");
  LocatorRecord rec;
  if (!r.take(32, &p)) return record_damaged("cut short");
  std::memcpy(rec.publisher.data(), p, 32);
  if (rec.publisher != publisher) return record_damaged("written for another node");
  if (!r.take(8, &p)) return record_damaged("cut short");
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) t = (t << 8) | p[i];
  rec.issued_at = static_cast<int64_t>(t);
  auto addresses = read_list(r, kMaxLocatorAddresses, "addresses");
  if (!addresses) return std::move(addresses).error();
  rec.addresses = std::move(*addresses);
  auto relays = read_list(r, kMaxLocatorRelays, "relays");
  if (!relays) return std::move(relays).error();
  rec.relays = std::move(*relays);
  size_t signed_len = r.at();
  if (r.left() != kSignatureBytes) return record_damaged(r.left() < kSignatureBytes ? "cut short" : "trailing bytes");
  if (!r.take(kSignatureBytes, &p)) return record_damaged("cut short");
  if (!verify_signature(publisher, ByteView(plain.data(), signed_len), ByteView(p, kSignatureBytes))) {
    return record_damaged("its signature is not the publisher's");
  }
  return rec;
}

bool locator_is_newer(std::optional<int64_t> held, const LocatorRecord& found, int64_t now_unix) {
  if (found.issued_at > now_unix + std::chrono::duration_cast<std::chrono::seconds>(kLocatorClockSlack).count()) {
    return false;
  }
  return !held || found.issued_at > *held;
}

bool publish_due(const PublishState& s, std::chrono::steady_clock::time_point now, int64_t day,
                 const std::vector<std::string>& addresses, const std::vector<std::string>& relays) {
  if (!s.last) return true;
  if (day != s.last_day || addresses != s.last_addresses || relays != s.last_relays) return true;
  return now - *s.last >= kRepublishEvery;
}

bool lookup_due(const LookupState& s, std::chrono::steady_clock::time_point now) {
  if (s.running || !s.down_since || now - *s.down_since < kLookupAfterDown) return false;
  return !s.last_lookup || now - *s.last_lookup >= kLookupEvery;
}

}  // namespace yonder::discovery
