#include "base/bytes.h"

#include <gtest/gtest.h>

namespace yonder {
namespace {

TEST(Base64, Rfc4648Vectors) {
  // RFC 4648 section 10.
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(as_bytes(plain)), encoded);
    auto back = base64_decode(encoded);
    ASSERT_TRUE(back.has_value()) << encoded;
    EXPECT_EQ(std::string(back->begin(), back->end()), plain);
  }
}

TEST(Base64, RejectsMalformed) {
  EXPECT_FALSE(base64_decode("Zg="));       // length
  EXPECT_FALSE(base64_decode("Z==="));      // too much padding
  EXPECT_FALSE(base64_decode("Zg=a"));      // data after padding
  EXPECT_FALSE(base64_decode("Zh=="));      // non-zero dropped bits
  EXPECT_FALSE(base64_decode("Zm9v!A=="));  // bad character
  EXPECT_FALSE(base64_decode("Zg==Zg=="));  // padding in the middle
}

TEST(Hex, Encodes) {
  const uint8_t data[] = {0x00, 0xab, 0xff};
  EXPECT_EQ(hex_encode(data), "00abff");
}

}  // namespace
}  // namespace yonder
