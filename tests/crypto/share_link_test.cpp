#include "crypto/share_link.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

// Relays travel in the address list as "relay:HOST:PORT" and come back apart.
TEST(ShareLink, CarriesTheProvidersRelays) {
  Fixture f;
  f.link.relays = {"relay.example.org:7851", "198.18.0.1:7851"};
  auto text = encode_share_link(f.link, f.provider);
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  auto back = decode_share_link(*text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->addresses, f.link.addresses);
  EXPECT_EQ(back->relays, f.link.relays);
  // Eight entries in all.
  f.link.relays = std::vector<std::string>(7, "198.18.0.1:7851");
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
  f.link.relays = {"bad relay:1"};
  EXPECT_FALSE(encode_share_link(f.link, f.provider).ok());
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
