#include "crypto/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "support/temp_dir.h"

namespace yonder {
namespace {

using testing::TempDir;

TEST(Identity, SignsAndVerifies) {
  auto id = Identity::generate();
  ASSERT_TRUE(id.ok());
  std::string msg = "hello";
  Bytes sig = id->sign(as_bytes(msg));
  EXPECT_TRUE(verify_signature(id->public_key(), as_bytes(msg), sig));
  sig[3] ^= 1;
  EXPECT_FALSE(verify_signature(id->public_key(), as_bytes(msg), sig));
}

TEST(Identity, Rfc8032Vector) {
  // RFC 8032 section 7.1, test 1: the public key derived from the secret.
  const char* seed_hex = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
  const char* pub_hex = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
  Bytes seed;
  for (int i = 0; i < 32; ++i) seed.push_back(static_cast<uint8_t>(std::stoi(std::string(seed_hex + 2 * i, 2), nullptr, 16)));
  auto id = Identity::from_seed(seed);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(hex_encode(id->public_key()), pub_hex);
}

TEST(KeyFile, PlainRoundTrip) {
  auto id = Identity::generate();
  ASSERT_TRUE(id.ok());
  auto text = encode_key_file(*id, std::nullopt);
  ASSERT_TRUE(text.ok());
  auto parsed = parse_key_file(*text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_FALSE(parsed->encrypted);
  auto back = open_key_file(*parsed, std::nullopt);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->node_id(), id->node_id());
}

TEST(KeyFile, PassphraseRoundTripAndWrongPassphrase) {
  auto id = Identity::generate();
  ASSERT_TRUE(id.ok());
  auto text = encode_key_file(*id, std::string("correct horse"), KdfStrength::kInteractive);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find(base64_encode(id->seed())), std::string::npos) << "seed must not appear in the clear";
  auto parsed = parse_key_file(*text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_TRUE(parsed->encrypted);

  auto back = open_key_file(*parsed, std::string("correct horse"));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->node_id(), id->node_id());

  auto wrong = open_key_file(*parsed, std::string("battery staple"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(wrong.error().message().find("wrong passphrase"), std::string::npos);

  auto none = open_key_file(*parsed, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("YONDER_PASSPHRASE"), std::string::npos);
}

TEST(KeyFile, TamperedPublicKeyIsRejected) {
  auto a = Identity::generate();
  auto b = Identity::generate();
  ASSERT_TRUE(a.ok() && b.ok());
  auto text = encode_key_file(*a, std::string("pw"), KdfStrength::kInteractive);
  ASSERT_TRUE(text.ok());
  std::string swapped = *text;
  std::string pub_a = base64_encode(a->public_key());
  swapped.replace(swapped.find(pub_a), pub_a.size(), base64_encode(b->public_key()));
  auto parsed = parse_key_file(swapped);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(open_key_file(*parsed, std::string("pw")).ok());
}

TEST(KeyFile, DamagedFilesGiveClearErrors) {
  EXPECT_FALSE(parse_key_file("").ok());
  EXPECT_FALSE(parse_key_file("not a key\n").ok());
  EXPECT_FALSE(parse_key_file("yonder-identity v1\npublic: AAAA\nkdf: none\nsecret: AAAA\n").ok());
  EXPECT_FALSE(parse_key_file(std::string(kMaxKeyFileSize + 1, 'a')).ok());
  auto dup = parse_key_file("yonder-identity v1\nkdf: none\nkdf: none\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(dup.error().message().find("yonder init"), std::string::npos);
}

TEST(KeyFile, WrittenPrivateAndNeverReplaced) {
  TempDir dir;
  std::string path = dir / "identity.key";
  ::umask(022);
  ASSERT_TRUE(write_key_file(path, "secret").ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = write_key_file(path, "other");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kAlreadyExists);
  auto read = read_key_file(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "secret");
}

TEST(KeyFile, ReadableByOthersIsRefusedWithFix) {
  TempDir dir;
  std::string path = dir / "identity.key";
  ASSERT_TRUE(write_key_file(path, "secret").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto read = read_key_file(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(read.error().message().find("chmod 600 " + path), std::string::npos);
  EXPECT_NE(read.error().message().find("0644"), std::string::npos);
  auto missing = read_key_file(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace yonder
