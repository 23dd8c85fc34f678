#include "crypto/share_link.h"

#include "base/terminal_text.h"
#include "crypto/node_id.h"

#include <openssl/sha.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <optional>

namespace yonder {
namespace {

constexpr uint8_t kVersion = 2;
constexpr uint8_t kVersion1 = 1;
constexpr std::string_view kSignContextV1 = "yonder-share-link-v1";
constexpr std::string_view kSignContextV2 = "yonder-share-link-v2";
constexpr size_t kMaxAddresses = 8;  // addresses and relays together
constexpr size_t kMaxAddressLength = 80;
// v1 wrote a relay as the address entry "relay:host:port" (80 at most), so a
// relay's host:port had 74; v2 keeps that bound, which also keeps the worst
// case (4 relays, 4 addresses, a 64-byte name) within kMaxLinkBytes.
constexpr size_t kMaxRelays = 4;
constexpr size_t kMaxRelayAddressLength = kMaxAddressLength - 6;
constexpr size_t kMaxNameLength = 64;
constexpr size_t kSignatureSize = 64;

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { be(v, 2); }
  void u32(uint32_t v) { be(v, 4); }
  void u64(uint64_t v) { be(v, 8); }
  void bytes(ByteView b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void str8(std::string_view s) {
    u8(static_cast<uint8_t>(s.size()));
    bytes(as_bytes(s));
  }
  Bytes& out() { return out_; }

 private:
  void be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Bytes out_;
};

class Reader {
 public:
  explicit Reader(ByteView in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }
  uint8_t u8() { return static_cast<uint8_t>(be(1)); }
  uint16_t u16() { return static_cast<uint16_t>(be(2)); }
  uint32_t u32() { return static_cast<uint32_t>(be(4)); }
  uint64_t u64() { return be(8); }
  template <size_t N>
  void fixed(std::array<uint8_t, N>& out) {
    if (!need(N)) return;
    std::copy(in_.begin() + static_cast<long>(pos_), in_.begin() + static_cast<long>(pos_ + N), out.begin());
    pos_ += N;
  }
  std::string str8(size_t max) {
    size_t n = u8();
    if (n > max) ok_ = false;
    if (!ok_ || !need(n)) return {};
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  bool need(size_t n) {
    if (!ok_ || left() < n) ok_ = false;
    return ok_;
  }
  uint64_t be(int n) {
    if (!need(static_cast<size_t>(n))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | in_[pos_++];
    return v;
  }
  ByteView in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

std::string base64url(ByteView data) {
  std::string s = base64_encode(data);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) {
    if (c == '+') c = '-';
    else if (c == '/') c = '_';
  }
  return s;
}

// Lenient on the tail: a link cut short still decodes (to a short payload,
// reported as truncated) instead of failing as "not base64". Integrity comes
// from the signature, not from canonical encoding.
std::optional<Bytes> from_base64url(std::string_view text) {
  Bytes out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '-') v = 62;
    else if (c == '_') v = 63;
    else return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  return out;
}

// The label binds the signature to one format version: a v2 body can never
// be read as a (differently laid out) v1 body with a valid signature.
Bytes signed_message(std::string_view context, ByteView body) {
  Bytes msg(context.begin(), context.end());
  msg.insert(msg.end(), body.begin(), body.end());
  return msg;
}

bool printable_address(std::string_view a) {
  if (a.empty() || a.size() > kMaxAddressLength) return false;
  for (char c : a) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ':' || c == '[' || c == ']' || c == '-' ||
          c == '%')) {
      return false;
    }
  }
  return true;
}

// A relay's HOST:PORT: what RelayClient can dial and parse_link_relay reads back.
bool relay_address(std::string_view a) {
  size_t colon = a.rfind(':');
  return printable_address(a) && colon != std::string_view::npos && colon != 0 && colon + 1 != a.size();
}

Error bad_link(const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, why);
}

}  // namespace

std::string ShareLink::id_text() const { return hex_encode(id); }

std::string LinkRelay::text() const {
  return key ? address + "@" + NodeId(*key).to_string() : address;
}

Result<LinkRelay> parse_link_relay(std::string_view text) {
  LinkRelay relay;
  size_t at = text.find('@');
  relay.address = std::string(text.substr(0, at));
  if (!relay_address(relay.address)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "relay \"" + std::string(text.substr(0, 120)) + "\" is not HOST:PORT[@NODE_ID]");
  }
  if (at != std::string_view::npos) {
    auto id = NodeId::parse(text.substr(at + 1));
    if (!id) {
      return make_error(ErrorCode::kInvalidArgument,
                        "relay \"" + std::string(text.substr(0, 120)) +
                            "\": the part after @ must be the relay's node id (yonder-relay prints it at start): " +
                            id.error().message());
    }
    relay.key = id->public_key();
  }
  return relay;
}

std::string relay_peer_address(const LinkRelay& relay) { return std::string(kRelayAddressPrefix) + relay.text(); }

Result<std::optional<LinkRelay>> relay_of_peer_address(std::string_view address) {
  if (address.substr(0, kRelayAddressPrefix.size()) != kRelayAddressPrefix) return std::optional<LinkRelay>();
  auto relay = parse_link_relay(address.substr(kRelayAddressPrefix.size()));
  if (!relay) return std::move(relay).error();
  return std::optional<LinkRelay>(std::move(*relay));
}

Result<std::string> encode_share_link(const ShareLink& link, const Identity& provider) {
  if (provider.public_key() != link.provider_key) {
    return make_error(ErrorCode::kInvalidArgument, "a share link must be signed by the provider it names");
  }
  if (link.addresses.size() + link.relays.size() > kMaxAddresses) {
    return make_error(ErrorCode::kInvalidArgument, "a share link carries at most 8 addresses and relays");
  }
  if (link.relays.size() > kMaxRelays) {
    return make_error(ErrorCode::kInvalidArgument,
                      "a share link carries at most 4 relays; name fewer relays in link.relays");
  }
  for (const auto& r : link.relays) {
    if (!relay_address(r.address) || r.address.size() > kMaxRelayAddressLength) {
      return make_error(ErrorCode::kInvalidArgument,
                        "relay \"" + r.address.substr(0, 90) + "\" cannot go in a share link (at most 74 characters "
                        "of HOST:PORT); name it by a shorter address in link.relays");
    }
    if (!r.key) {
      return make_error(ErrorCode::kInvalidArgument,
                        "relay \"" + r.address + "\" has no known key, and a share link names only relays by key; "
                        "pin it with link.relays = " + r.address + "@NODE_ID");
    }
  }
  for (const auto& a : link.addresses) {
    if (!printable_address(a) || a.rfind(kRelayAddressPrefix, 0) == 0) {
      return make_error(ErrorCode::kInvalidArgument, "address \"" + a.substr(0, 90) + "\" cannot go in a share link");
    }
  }
  if (!link.provider_name.empty() && !printable_name(link.provider_name)) {
    return make_error(ErrorCode::kInvalidArgument, "node.name has control characters; set a printable name");
  }
  if (link.provider_name.size() > kMaxNameLength) {
    return make_error(ErrorCode::kInvalidArgument, "node names in share links are at most 64 bytes; shorten node.name");
  }
  Writer w;
  w.u8(kVersion);
  w.bytes(link.provider_key);
  w.bytes(link.id);
  w.bytes(link.secret);
  w.u64(static_cast<uint64_t>(link.expires_at));
  w.u16(link.uses);
  const Scope& s = link.scope;
  w.u8(s.capabilities);
  w.u8(s.egress ? 1 : 0);
  w.u16(s.gpus);
  w.u64(s.vram_bytes);
  w.u32(s.max_time_s);
  w.u16(s.max_jobs);
  w.u32(s.cpus_milli);
  w.u64(s.memory_bytes);
  w.u64(s.disk_bytes);
  w.u8(static_cast<uint8_t>(link.addresses.size()));
  for (const auto& a : link.addresses) w.str8(a);
  w.u8(static_cast<uint8_t>(link.relays.size()));
  for (const auto& r : link.relays) {
    w.str8(r.address);
    w.bytes(*r.key);
  }
  w.str8(link.provider_name);
  Bytes sig = provider.sign(signed_message(kSignContextV2, w.out()));
  w.bytes(sig);
  // Holds by the bounds above; checked so that a change to them cannot
  // produce links the decoder refuses.
  if (w.out().size() > kMaxLinkBytes) {
    return make_error(ErrorCode::kInternal, "this share link would be longer than a link may be (" +
                                                std::to_string(w.out().size()) +
                                                " bytes); name fewer addresses or relays and share again");
  }
  return std::string(kLinkScheme) + base64url(w.out());
}

Result<ShareLink> decode_share_link(std::string_view text) {
  // People paste links with spaces, newlines or angle brackets around them.
  while (!text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) || text.front() == '<')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (std::isspace(static_cast<unsigned char>(text.back())) || text.back() == '>')) {
    text.remove_suffix(1);
  }
  if (text.substr(0, kLinkScheme.size()) != kLinkScheme) {
    return bad_link("this is not a Yonder share link (it should start with yonder://); copy the whole link again");
  }
  text.remove_prefix(kLinkScheme.size());
  if (text.size() > kMaxLinkBytes * 4 / 3 + 4) return bad_link("this share link is too long to be valid");
  auto raw = from_base64url(text);
  if (!raw) {
    return bad_link("this share link is damaged (it contains characters a link never has, or was cut short); "
                    "copy the whole link again");
  }
  Reader r(*raw);
  ShareLink link;
  uint8_t version = r.u8();
  if (r.ok() && version != kVersion && version != kVersion1) {
    return bad_link("this share link has format version " + std::to_string(version) +
                    ", which this yonder does not know; upgrade yonder");
  }
  r.fixed(link.provider_key);
  r.fixed(link.id);
  r.fixed(link.secret);
  link.expires_at = static_cast<int64_t>(r.u64());
  link.uses = r.u16();
  Scope& s = link.scope;
  s.capabilities = r.u8();
  s.egress = (r.u8() & 1) != 0;
  s.gpus = r.u16();
  s.vram_bytes = r.u64();
  s.max_time_s = r.u32();
  s.max_jobs = r.u16();
  s.cpus_milli = r.u32();
  s.memory_bytes = r.u64();
  s.disk_bytes = r.u64();
  size_t n_addr = r.u8();
  if (n_addr > kMaxAddresses) return bad_link("this share link is damaged (too many addresses)");
  for (size_t i = 0; i < n_addr && r.ok(); ++i) link.addresses.push_back(r.str8(kMaxAddressLength));
  if (version == kVersion) {
    size_t n_relays = r.u8();
    if (n_relays > kMaxRelays || n_addr + n_relays > kMaxAddresses) {
      return bad_link("this share link is damaged (too many relays)");
    }
    for (size_t i = 0; i < n_relays && r.ok(); ++i) {
      LinkRelay relay;
      relay.address = r.str8(kMaxRelayAddressLength);
      PublicKeyBytes key{};
      r.fixed(key);
      relay.key = key;
      link.relays.push_back(std::move(relay));
    }
  }
  link.provider_name = r.str8(kMaxNameLength);
  if (!link.provider_name.empty() && !printable_name(link.provider_name)) {
    return bad_link("this share link's provider name has control characters (a terminal would obey them); ask the "
                    "provider for a link from a node with a printable name");
  }
  size_t body_size = raw->size() - r.left();
  std::array<uint8_t, kSignatureSize> sig{};
  r.fixed(sig);
  if (!r.ok()) {
    return bad_link("this share link is truncated (part of it is missing); copy the whole link again");
  }
  if (r.left() != 0) return bad_link("this share link has extra bytes at the end; copy exactly the link");
  std::string_view context = version == kVersion ? kSignContextV2 : kSignContextV1;
  if (!verify_signature(link.provider_key, signed_message(context, ByteView(raw->data(), body_size)), sig)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "this share link has been altered (its signature does not match the provider's key); "
                      "do not use it, and ask the provider for a new link");
  }
  for (const auto& relay : link.relays) {
    if (!relay_address(relay.address)) return bad_link("this share link carries an invalid relay address");
  }
  std::vector<std::string> direct;
  for (auto& a : link.addresses) {
    if (!printable_address(a)) return bad_link("this share link carries an invalid address");
    if (a.rfind(kRelayAddressPrefix, 0) == 0) {
      // v2 names relays only in their own list, with their key.
      if (version == kVersion || !relay_address(std::string_view(a).substr(kRelayAddressPrefix.size()))) {
        return bad_link("this share link carries an invalid relay");
      }
      link.relays.push_back(LinkRelay{a.substr(kRelayAddressPrefix.size()), std::nullopt});
    } else {
      direct.push_back(std::move(a));
    }
  }
  link.addresses = std::move(direct);
  link.version = version;
  return link;
}

Status check_link_expiry(const ShareLink& link, TimePoint now) {
  if (unix_seconds(now) < link.expires_at) return ok_status();
  std::time_t t = static_cast<std::time_t>(link.expires_at);
  char when[32];
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  return make_error(ErrorCode::kFailedPrecondition,
                    std::string("this share link expired at ") + when + "; ask the provider for a new one");
}

Bytes hash_link_secret(const LinkSecret& secret) {
  Bytes out(SHA256_DIGEST_LENGTH);
  SHA256(secret.data(), secret.size(), out.data());
  return out;
}

std::array<uint8_t, 32> link_rendezvous_token(const LinkIdBytes& id, ByteView secret_hash) {
  static constexpr std::string_view kLabel = "yonder-relay-rendezvous-v1";
  Bytes input(kLabel.begin(), kLabel.end());
  input.insert(input.end(), id.begin(), id.end());
  input.insert(input.end(), secret_hash.begin(), secret_hash.end());
  std::array<uint8_t, 32> out{};
  SHA256(input.data(), input.size(), out.data());
  return out;
}

Result<LinkIdBytes> parse_link_id(std::string_view text) {
  LinkIdBytes id{};
  if (text.size() != 32) {
    return make_error(ErrorCode::kInvalidArgument, "a link id has 32 hex digits; `yonder links` lists them");
  }
  for (size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(text.data() + 2 * i, text.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || p != text.data() + 2 * i + 2) {
      return make_error(ErrorCode::kInvalidArgument, "a link id has 32 hex digits; `yonder links` lists them");
    }
    id[i] = static_cast<uint8_t>(v);
  }
  return id;
}

}  // namespace yonder
