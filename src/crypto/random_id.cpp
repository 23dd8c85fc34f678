#include "crypto/random_id.h"

#include <sodium.h>

#include <vector>

#include "base/bytes.h"

namespace yonder {

std::string random_hex_id(size_t bytes) {
  std::vector<uint8_t> b(bytes);
  randombytes_buf(b.data(), b.size());
  return hex_encode(ByteView(b.data(), b.size()));
}

}  // namespace yonder
