#include "discovery/announcement.h"

#include <sodium.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace yonder::discovery {

namespace {

constexpr uint8_t kMagic[4] = {'Y', 'L', 'A', 'N'};
// Domain separation: these MACs are for LAN announcements and nothing else.
constexpr std::string_view kTagLabel = "yonder-lan-v1";

// Bytes 0..24 of the datagram for `a`, with `count` as the tag count.
std::array<uint8_t, kHeaderSize> header(const Announcement& a) {
  std::array<uint8_t, kHeaderSize> h{};
  std::memcpy(h.data(), kMagic, 4);
  h[4] = kVersion;
  h[5] = a.flags;
  h[6] = static_cast<uint8_t>(a.link_port >> 8);
  h[7] = static_cast<uint8_t>(a.link_port & 0xff);
  std::memcpy(h.data() + 8, a.nonce.data(), kNonceSize);
  h[24] = static_cast<uint8_t>(a.tags.size());
  return h;
}

Error invalid(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "not a Yonder LAN announcement: " + what);
}

}  // namespace

Result<Announcement> decode_announcement(ByteView d) {
  if (d.size() > kMaxAnnouncementSize) return invalid("longer than " + std::to_string(kMaxAnnouncementSize) + " bytes");
  if (d.size() < kHeaderSize + kTagSize) return invalid("too short");
  if (std::memcmp(d.data(), kMagic, 4) != 0) return invalid("wrong magic");
  if (d[4] != kVersion) return invalid("version " + std::to_string(d[4]) + " (this node speaks 1)");
  Announcement a;
  a.flags = d[5];
  a.link_port = static_cast<uint16_t>((d[6] << 8) | d[7]);
  if (a.link_port == 0) return invalid("port 0");
  std::memcpy(a.nonce.data(), d.data() + 8, kNonceSize);
  size_t count = d[24];
  if (count == 0 || count > kMaxTags) return invalid("tag count " + std::to_string(count));
  if (d.size() != kHeaderSize + count * kTagSize) return invalid("size does not match the tag count");
  a.tags.resize(count);
  for (size_t i = 0; i < count; ++i) std::memcpy(a.tags[i].data(), d.data() + kHeaderSize + i * kTagSize, kTagSize);
  return a;
}

Bytes encode_announcement(const Announcement& a) {
  if (a.tags.empty() || a.tags.size() > kMaxTags || a.link_port == 0) std::abort();  // a caller's bug
  auto h = header(a);
  Bytes out(h.begin(), h.end());
  for (const auto& t : a.tags) out.insert(out.end(), t.begin(), t.end());
  return out;
}

Tag announcement_tag(const PairKey& key, const PublicKeyBytes& announcer, const Announcement& a) {
  auto h = header(a);
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key.data(), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const uint8_t*>(kTagLabel.data()), kTagLabel.size());
  crypto_auth_hmacsha256_update(&st, announcer.data(), announcer.size());
  crypto_auth_hmacsha256_update(&st, h.data(), h.size());
  uint8_t mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, mac);
  Tag t;
  std::memcpy(t.data(), mac, kTagSize);
  return t;
}

bool tags_equal(const Tag& a, const Tag& b) {
  return sodium_memcmp(a.data(), b.data(), kTagSize) == 0;
}

}  // namespace yonder::discovery
