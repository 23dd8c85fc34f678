#include "crypto/share_link.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "crypto/node_id.h"

namespace yonder {
namespace {

struct Fixture {
  Identity provider = Identity::generate().value();
  ShareLink link;
  Fixture() {
    link.provider_key = provider.public_key();
    for (size_t i = 0; i < link.id.size(); ++i) link.id[i] = static_cast<uint8_t>(i);
    for (size_t i = 0; i < link.secret.size(); ++i) link.secret[i] = static_cast<uint8_t>(100 + i);
    link.expires_at = 2'000'000'000;
    link.uses = 3;
    link.scope.capabilities = static_cast<uint8_t>(Capability::kRun) | static_cast<uint8_t>(Capability::kFiles);
    link.scope.gpus = 2;
    link.scope.vram_bytes = 20ull << 30;
    link.scope.egress = true;
    link.addresses = {"192.168.1.20:7850", "[fe80::1%eth0]:7850"};
    link.provider_name = "studio";
  }
};

TEST(ShareLink, RoundTripsEveryField) {
  Fixture f;
  auto text = encode_share_link(f.link, f.provider);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  EXPECT_EQ(text->rfind("yonder://", 0), 0u);
  // Copy-paste safe: only URL-safe base64 after the scheme.
  EXPECT_EQ(text->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 9),
            std::string::npos);
  auto back = decode_share_link("  <" + *text + ">\n");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->provider_key, f.link.provider_key);
  EXPECT_EQ(back->id, f.link.id);
  EXPECT_EQ(back->secret, f.link.secret);
  EXPECT_EQ(back->expires_at, f.link.expires_at);
  EXPECT_EQ(back->uses, 3);
  EXPECT_EQ(back->scope, f.link.scope);
  EXPECT_EQ(back->addresses, f.link.addresses);
  EXPECT_EQ(back->provider_name, "studio");
  EXPECT_TRUE(back->relays.empty());
}

// A provider's name is shown on the consumer's terminal at pairing, before
// the check digits: one that carries control sequences (OSC 52 writes the
// clipboard, CSI 2J clears the screen) never goes into a link.
TEST(ShareLink, AProviderNameWithControlSequencesIsRefused) {
  Fixture f;
  f.link.provider_name = "ev\x1b]52;c;ZXZpbA==\x07\x1b[2Jil";
  auto text = encode_share_link(f.link, f.provider);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message().find("printable"), std::string::npos) << text.error().message();
  f.link.provider_name = "Zoë's box";
  EXPECT_TRUE(encode_share_link(f.link, f.provider).ok());
}

LinkRelay relay_with_key(const std::string& address, uint8_t fill) {
  PublicKeyBytes key{};
  key.fill(fill);
  return LinkRelay{address, key};
}

// base64url without padding, both ways, for tests that edit a link's bytes.
std::string to_link(const Bytes& raw) {
  std::string s = base64_encode(raw);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return std::string(kLinkScheme) + s;
}

Bytes from_link(std::string text) {
  text = text.substr(kLinkScheme.size());
  for (char& c : text) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (text.size() % 4 != 0) text += '=';
  return base64_decode(text).value();
}

// Signs `body` as the provider would under `label`: how a test makes a link
// the encoder refuses to write but a forger with the key could.
std::string sign_body(const Identity& provider, const Bytes& body, std::string_view label) {
  Bytes msg(label.begin(), label.end());
  msg.insert(msg.end(), body.begin(), body.end());
  Bytes raw = body;
  Bytes sig = provider.sign(msg);
  raw.insert(raw.end(), sig.begin(), sig.end());
  return to_link(raw);
}

// Where `needle` starts in `hay` (the test's own links: it occurs once).
size_t find_bytes(const Bytes& hay, ByteView needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  return static_cast<size_t>(it - hay.begin());
}

// Format v2: relays travel in their own list, each with its key, apart from
// the direct addresses.
TEST(ShareLink, CarriesTheProvidersRelaysWithTheirKeys) {
  Fixture f;
  f.link.relays = {relay_with_key("relay.example.org:7851", 7), relay_with_key("198.18.0.1:7851", 9)};
  auto text = encode_share_link(f.link, f.provider);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  EXPECT_EQ(from_link(*text)[0], 2) << "the encoder writes format v2";
  auto back = decode_share_link(*text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->version, 2);
  EXPECT_EQ(back->addresses, f.link.addresses);
  EXPECT_EQ(back->relays, f.link.relays);
  ASSERT_TRUE(back->relays[1].key.has_value());
  EXPECT_EQ(back->relays[1].key->at(0), 9);
}

// A link made by a yonder from before v2 (this very text came from its
// encoder, with Identity::from_seed(1..32)): it still decodes, its relay
// comes back without a key, and its address list without the relay.
TEST(ShareLink, AVersion1LinkStillDecodes) {
  const std::string v1 =
      "yonder://AXm1Vi6P5lT5QHixEuipi6eQH4U65pW-1-DjkQutBJZkAAECAwQFBgcICQoLDA0OD2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn"
      "-AgYKDAAAAAHc1lAAAAwEAAAIAAAAAAAAAAAAAHCAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAhExOTIuMTY4LjEuMjA6Nzg1MBxyZWxheTpyZWxh"
      "eS5leGFtcGxlLm9yZzo3ODUxBnN0dWRpb34_t7IL98nCTq50V7Bw-vP67sx7QCLrXvJTtTb15uxlYHOS8km5OMSPv48APQgnHuG1FnkWmeOf"
      "wAdIhka87gE";
  Bytes seed(32);
  for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<uint8_t>(i + 1);
  auto provider = Identity::from_seed(seed).value();
  auto link = decode_share_link(v1);
  ASSERT_TRUE(link.ok()) << link.error().to_string();
  EXPECT_EQ(link->version, 1);
  EXPECT_EQ(link->provider_key, provider.public_key());
  EXPECT_EQ(link->expires_at, 2'000'000'000);
  EXPECT_EQ(link->uses, 3);
  EXPECT_EQ(link->scope.gpus, 2);
  EXPECT_EQ(link->addresses, std::vector<std::string>{"192.168.1.20:7850"});
  ASSERT_EQ(link->relays.size(), 1u);
  EXPECT_EQ(link->relays[0].address, "relay.example.org:7851");
  EXPECT_FALSE(link->relays[0].key.has_value()) << "a v1 link knows no relay key";
  EXPECT_EQ(link->provider_name, "studio");
  // Tampering with a v1 link is still caught.
  Bytes raw = from_link(v1);
  raw[raw.size() - 70] ^= 1;  // inside the name
  auto t = decode_share_link(to_link(raw));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), ErrorCode::kPermissionDenied);
}

TEST(ShareLink, ATamperedRelayKeyFailsTheSignature) {
  Fixture f;
  f.link.relays = {relay_with_key("198.18.0.1:7851", 0x5a)};
  Bytes raw = from_link(encode_share_link(f.link, f.provider).value());
  size_t at = find_bytes(raw, *f.link.relays[0].key);
  ASSERT_LT(at + 32, raw.size());
  raw[at + 31] ^= 0x01;  // an attacker's relay key in place of the provider's
  auto t = decode_share_link(to_link(raw));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(t.error().message().find("altered"), std::string::npos) << t.error().message();
}

// The signature's label names the version: a v2 body signed under the v1
// label (or a v1 body relabelled as v2) does not verify.
TEST(ShareLink, TheSignatureCoversTheFormatVersion) {
  Fixture f;
  f.link.relays = {relay_with_key("198.18.0.1:7851", 1)};
  Bytes raw = from_link(encode_share_link(f.link, f.provider).value());
  Bytes body(raw.begin(), raw.end() - 64);
  EXPECT_TRUE(decode_share_link(sign_body(f.provider, body, "yonder-share-link-v2")).ok());
  auto v1_label = decode_share_link(sign_body(f.provider, body, "yonder-share-link-v1"));
  ASSERT_FALSE(v1_label.ok());
  EXPECT_EQ(v1_label.error().code(), ErrorCode::kPermissionDenied);
}

TEST(ShareLink, RelayBoundsOnEncode) {
  Fixture f;
  // At most 4 relays, and 8 entries with the addresses.
  f.link.relays = std::vector<LinkRelay>(5, relay_with_key("198.18.0.1:7851", 1));
  f.link.addresses = {};
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
  f.link.relays.resize(4);
  f.link.addresses = std::vector<std::string>(5, "1.2.3.4:5");
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
  f.link.addresses.resize(4);
  EXPECT_TRUE(encode_share_link(f.link, f.provider).ok());
  // A relay with no key never goes into a link; the error says how to pin it.
  f.link.relays = {LinkRelay{"198.18.0.1:7851", std::nullopt}};
  auto keyless = encode_share_link(f.link, f.provider);
  ASSERT_FALSE(keyless.ok());
  EXPECT_NE(keyless.error().message().find("link.relays = 198.18.0.1:7851@NODE_ID"), std::string::npos)
      << keyless.error().message();
  for (const std::string& bad :
       std::vector<std::string>{"bad relay:1", "no-port", ":7851", "host:", std::string(70, 'r') + ":7851"}) {
    f.link.relays = {relay_with_key(bad, 1)};
    EXPECT_FALSE(encode_share_link(f.link, f.provider).ok()) << bad;
  }
  // A relay posing as a direct address.
  f.link.relays = {};
  f.link.addresses = {"relay:198.18.0.1:7851"};
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
}

// The largest link the bounds allow still fits kMaxLinkBytes and decodes.
TEST(ShareLink, TheLargestLinkFits) {
  Fixture f;
  f.link.relays = std::vector<LinkRelay>(4, relay_with_key(std::string(69, 'r') + ":7851", 3));
  f.link.addresses = std::vector<std::string>(4, std::string(75, 'a') + ":7850");
  f.link.provider_name = std::string(64, 'n');
  auto text = encode_share_link(f.link, f.provider);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  EXPECT_LE(from_link(*text).size(), kMaxLinkBytes);
  auto back = decode_share_link(*text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->relays, f.link.relays);
}

// What a forger holding the provider's key could sign but the format
// forbids: the decoder refuses it (each is a signed, well-formed v2 body but
// for the one bound it breaks).
TEST(ShareLink, RelayBoundsOnDecode) {
  Fixture f;
  f.link.addresses = {};
  f.link.relays = {relay_with_key("198.18.0.1:7851", 1)};
  Bytes raw = from_link(encode_share_link(f.link, f.provider).value());
  Bytes body(raw.begin(), raw.end() - 64);
  // [address count = 0][relay count = 1][15 "198.18.0.1:7851"][32 key][name]
  size_t counts = find_bytes(body, as_bytes(std::string_view("198.18.0.1:7851"))) - 3;
  ASSERT_EQ(body[counts], 0);
  ASSERT_EQ(body[counts + 1], 1);
  Bytes one_relay(body.begin() + static_cast<long>(counts) + 2, body.begin() + static_cast<long>(counts) + 2 + 48);
  auto with_relays = [&](size_t n) {
    Bytes b(body.begin(), body.begin() + static_cast<long>(counts) + 1);
    b.push_back(static_cast<uint8_t>(n));
    for (size_t i = 0; i < n; ++i) b.insert(b.end(), one_relay.begin(), one_relay.end());
    b.insert(b.end(), body.begin() + static_cast<long>(counts) + 2 + 48, body.end());
    return b;
  };
  auto four = decode_share_link(sign_body(f.provider, with_relays(4), "yonder-share-link-v2"));
  ASSERT_TRUE(four.ok()) << four.error().to_string();
  EXPECT_EQ(four->relays.size(), 4u);
  auto five = decode_share_link(sign_body(f.provider, with_relays(5), "yonder-share-link-v2"));
  ASSERT_FALSE(five.ok());
  EXPECT_NE(five.error().message().find("too many relays"), std::string::npos) << five.error().message();
  // A relay list cut short is truncated, not read past.
  Bytes cut = with_relays(2);
  cut.resize(counts + 2 + 48 + 20);
  EXPECT_FALSE(decode_share_link(sign_body(f.provider, cut, "yonder-share-link-v2")).ok());
  // A keyless "relay:" entry among a v2 link's addresses.
  Bytes sneaky(body.begin(), body.begin() + static_cast<long>(counts));
  std::string entry = "relay:198.18.0.1:7851";
  sneaky.push_back(1);
  sneaky.push_back(static_cast<uint8_t>(entry.size()));
  sneaky.insert(sneaky.end(), entry.begin(), entry.end());
  sneaky.push_back(0);
  sneaky.insert(sneaky.end(), body.begin() + static_cast<long>(counts) + 2 + 48, body.end());
  auto s = decode_share_link(sign_body(f.provider, sneaky, "yonder-share-link-v2"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("invalid relay"), std::string::npos) << s.error().message();
}

// The form a consumer stores a provider's relay in, and link.relays' form.
TEST(LinkRelay, TextRoundTrips) {
  LinkRelay pinned = relay_with_key("relay.example.org:7851", 4);
  EXPECT_EQ(pinned.text(), "relay.example.org:7851@" + NodeId(*pinned.key).to_string());
  EXPECT_EQ(parse_link_relay(pinned.text()).value(), pinned);
  EXPECT_EQ(parse_link_relay("[fe80::1]:7851").value(), (LinkRelay{"[fe80::1]:7851", std::nullopt}));
  auto stored = relay_of_peer_address(relay_peer_address(pinned));
  ASSERT_TRUE(stored.ok()) << stored.error().to_string();
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ(**stored, pinned);
  auto direct = relay_of_peer_address("192.168.1.20:7850");
  ASSERT_TRUE(direct.ok());
  EXPECT_FALSE(direct->has_value());
  EXPECT_FALSE(relay_of_peer_address("relay:").ok());
  EXPECT_FALSE(parse_link_relay("relay.example.org:7851@notanid").ok());
  auto bad = parse_link_relay("no port");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("HOST:PORT[@NODE_ID]"), std::string::npos) << bad.error().message();
}

TEST(ShareLink, RendezvousTokenNeedsTheSecretHash) {
  Fixture f;
  Bytes hash = hash_link_secret(f.link.secret);
  auto token = link_rendezvous_token(f.link.id, hash);
  EXPECT_EQ(token, link_rendezvous_token(f.link.id, hash));
  LinkIdBytes other_id = f.link.id;
  other_id[0] ^= 1;
  EXPECT_NE(token, link_rendezvous_token(other_id, hash));
  Bytes other_hash = hash;
  other_hash[0] ^= 1;
  EXPECT_NE(token, link_rendezvous_token(f.link.id, other_hash));
  // Not the secret's hash itself (the provider's database keeps that).
  EXPECT_FALSE(std::equal(token.begin(), token.end(), hash.begin()));
}

TEST(ShareLink, TamperedTruncatedAndForeignAreDistinctErrors) {
  Fixture f;
  std::string text = encode_share_link(f.link, f.provider).value();
  // Flip one character in the middle (inside the signed body).
  std::string tampered = text;
  size_t pos = 40;
  tampered[pos] = tampered[pos] == 'A' ? 'B' : 'A';
  auto t = decode_share_link(tampered);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(t.error().message().find("altered"), std::string::npos) << t.error().message();

  auto cut = decode_share_link(text.substr(0, text.size() - 20));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("truncated"), std::string::npos) << cut.error().message();

  auto other = decode_share_link("https://example.com/x");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("not a Yonder share link"), std::string::npos);

  auto junk = decode_share_link("yonder://!!!!");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.error().message().find("damaged"), std::string::npos);

  auto extra = decode_share_link(text + "AAAA");
  EXPECT_FALSE(extra.ok());
}

TEST(ShareLink, SignedByAnotherKeyIsRejected) {
  Fixture f;
  auto mallory = Identity::generate().value();
  EXPECT_FALSE(encode_share_link(f.link, mallory).ok());  // refuses to sign for someone else
  f.link.provider_key = mallory.public_key();
  std::string text = encode_share_link(f.link, mallory).value();
  EXPECT_TRUE(decode_share_link(text).ok());  // valid, but it names mallory, not the studio
}

TEST(ShareLink, Expiry) {
  Fixture f;
  ManualClock clock(std::chrono::system_clock::from_time_t(1'999'999'990));
  EXPECT_TRUE(check_link_expiry(f.link, clock.now()).ok());
  clock.advance(std::chrono::seconds(10));
  auto st = check_link_expiry(f.link, clock.now());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("expired at 2033-05-18"), std::string::npos) << st.error().message();
}

TEST(ShareLink, BoundsOnEncode) {
  Fixture f;
  f.link.addresses = std::vector<std::string>(9, "1.2.3.4:5");
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
  f.link.addresses = {"bad address with spaces:1"};
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
  f.link.addresses = {};
  f.link.provider_name = std::string(65, 'x');
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
}

TEST(LinkId, ParsesHex) {
  auto id = parse_link_id("000102030405060708090a0b0c0d0e0f");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*id)[15], 15);
  EXPECT_FALSE(parse_link_id("00").ok());
  EXPECT_FALSE(parse_link_id("zz0102030405060708090a0b0c0d0e0f").ok());
}

TEST(Scope, ParsesUnitsAndCapabilities) {
  EXPECT_EQ(*parse_size("20G"), 20ull << 30);
  EXPECT_EQ(*parse_size("512m"), 512ull << 20);
  EXPECT_EQ(*parse_size("1024"), 1024u);
  EXPECT_FALSE(parse_size("G").ok());
  EXPECT_FALSE(parse_size("12X").ok());
  // A job's or a scope's sizes need a unit and at least 1 MiB.
  EXPECT_EQ(*parse_resource_size("20G", "--vram"), 20ull << 30);
  auto bare = parse_resource_size("20", "--vram");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.error().message().find("--vram 20 has no unit: write 20G for 20 GiB"), std::string::npos)
      << bare.error().message();
  EXPECT_FALSE(parse_resource_size("512K", "--memory").ok());
  EXPECT_NE(parse_resource_size("nope", "--disk").error().to_string().find("--disk"), std::string::npos);
  EXPECT_FALSE(parse_size("99999999999999999999T").ok());
  EXPECT_EQ(*parse_duration_s("2h"), 7200u);
  EXPECT_EQ(*parse_duration_s("90s"), 90u);
  EXPECT_EQ(*parse_duration_s("1d"), 86400u);
  EXPECT_FALSE(parse_duration_s("soon").ok());
  auto caps = parse_capabilities("run,exec");
  ASSERT_TRUE(caps.ok());
  Scope s;
  s.capabilities = *caps;
  EXPECT_TRUE(s.allows(Capability::kExec));
  EXPECT_FALSE(s.allows(Capability::kFiles));
  auto bad = parse_capabilities("run,root");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("run, exec, forward, files"), std::string::npos);
}

TEST(Scope, JsonRoundTripAndSummary) {
  Scope s;
  s.capabilities = static_cast<uint8_t>(Capability::kRun) | static_cast<uint8_t>(Capability::kForward);
  s.vram_bytes = 20ull << 30;
  s.memory_bytes = 16ull << 30;
  auto back = scope_from_json(scope_to_json(s));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(s.summary(), "run,forward; 1 GPU, 20 GiB VRAM, 2h, 1 job, 16 GiB memory, no egress");
  EXPECT_FALSE(scope_from_json(nlohmann::json::array()).ok());
  auto j = scope_to_json(s);
  j["gpus"] = -1;
  EXPECT_FALSE(scope_from_json(j).ok());
}

}  // namespace
}  // namespace yonder
