// Byte buffers and the text encodings used in files and links.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace yonder {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

inline ByteView as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Standard base64 (RFC 4648 section 4) with padding.
std::string base64_encode(ByteView data);
// Strict decoder: rejects bad characters, bad padding and non-canonical tails.
std::optional<Bytes> base64_decode(std::string_view text);

std::string hex_encode(ByteView data);

}  // namespace yonder
