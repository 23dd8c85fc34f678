// Random identifiers: `bytes` bytes from libsodium's CSPRNG, as lowercase
// hex (job ids, array ids, upload ids, temporary file suffixes).
#pragma once

#include <cstddef>
#include <string>

namespace yonder {

std::string random_hex_id(size_t bytes);

}  // namespace yonder
