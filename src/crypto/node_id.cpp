#include "crypto/node_id.h"

namespace yonder {
namespace {

// Crockford's base32 alphabet: no I, L, O, U.
constexpr char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
constexpr int kDataChars = 52;   // ceil(256 / 5)
constexpr int kChunk = 13;       // data characters per check character
constexpr int kChunks = 4;

int symbol_value(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  if (c == 'O') c = '0';
  if (c == 'I' || c == 'L') c = '1';
  for (int i = 0; i < 32; ++i) {
    if (kAlphabet[i] == c) return i;
  }
  return -1;
}

// Luhn mod N (N = 32) over symbol values.
int luhn_check(const int* values, int n) {
  int factor = 2;
  int sum = 0;
  for (int i = n - 1; i >= 0; --i) {
    int addend = factor * values[i];
    factor = factor == 2 ? 1 : 2;
    addend = addend / 32 + addend % 32;
    sum += addend;
  }
  return (32 - sum % 32) % 32;
}

}  // namespace

std::string NodeId::to_string() const {
  // 256 bits -> 52 symbols, most significant bits first, zero-padded.
  int values[kDataChars] = {};
  int bit = 0;
  for (int& v : values) {
    int x = 0;
    for (int k = 0; k < 5; ++k, ++bit) {
      x <<= 1;
      if (bit < 256) x |= (key_[bit / 8] >> (7 - bit % 8)) & 1;
    }
    v = x;
  }
  std::string raw;
  for (int c = 0; c < kChunks; ++c) {
    for (int i = 0; i < kChunk; ++i) raw += kAlphabet[values[c * kChunk + i]];
    raw += kAlphabet[luhn_check(values + c * kChunk, kChunk)];
  }
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i > 0 && i % 7 == 0) out += '-';
    out += raw[i];
  }
  return out;
}

Result<NodeId> NodeId::parse(std::string_view text) {
  if (text.size() > kMaxInputLength) {
    return make_error(ErrorCode::kInvalidArgument, "node id is too long: a node id has 56 characters in groups of 7");
  }
  int values[kDataChars + kChunks];
  int n = 0;
  for (char c : text) {
    if (c == '-' || c == ' ') continue;
    int v = symbol_value(c);
    if (v < 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        std::string("node id contains '") + (c >= 0x20 && c < 0x7f ? std::string(1, c) : "?") +
                            "', which is not a node id character; copy the id again from `yonder status` on that node");
    }
    if (n == kDataChars + kChunks) {
      return make_error(ErrorCode::kInvalidArgument, "node id has too many characters: it has 56, in groups of 7");
    }
    values[n++] = v;
  }
  if (n != kDataChars + kChunks) {
    return make_error(ErrorCode::kInvalidArgument, "node id has " + std::to_string(n) +
                                                       " characters, expected 56 (in groups of 7); check for a missing part");
  }
  int data[kDataChars];
  for (int c = 0; c < kChunks; ++c) {
    const int* chunk = values + c * (kChunk + 1);
    if (luhn_check(chunk, kChunk) != chunk[kChunk]) {
      return make_error(ErrorCode::kInvalidArgument,
                        "node id has a typo in characters " + std::to_string(c * (kChunk + 1) + 1) + "-" +
                            std::to_string((c + 1) * (kChunk + 1)) + " (the check character does not match); compare it again");
    }
    for (int i = 0; i < kChunk; ++i) data[c * kChunk + i] = chunk[i];
  }
  PublicKeyBytes key{};
  int bit = 0;
  for (int v : data) {
    for (int k = 4; k >= 0; --k, ++bit) {
      int b = (v >> k) & 1;
      if (bit < 256) {
        key[bit / 8] = static_cast<uint8_t>(key[bit / 8] | (b << (7 - bit % 8)));
      } else if (b != 0) {
        return make_error(ErrorCode::kInvalidArgument, "node id is not canonical (its padding bits are set); copy it again");
      }
    }
  }
  return NodeId(key);
}

}  // namespace yonder
