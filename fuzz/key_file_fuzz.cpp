// Fuzzes the key file decoder, and opening what it accepts with a fixed
// passphrase (memory limits in the file are bounded by the decoder).
#include <cstdint>
#include <string_view>

#include "crypto/identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto file = yonder::parse_key_file(text);
  if (file.ok() && !file->encrypted) {
    // Plain keys are cheap to open; encrypted ones would spend the whole run
    // in argon2id, and their AEAD check is covered by unit tests.
    auto id = yonder::open_key_file(*file, std::nullopt);
    (void)id;
  }
  return 0;
}
