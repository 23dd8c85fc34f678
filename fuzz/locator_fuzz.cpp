// Fuzzes what a DHT hands back for a paired peer (discovery/locator.h): the
// sealed value (open_locator; only the corpus's seal gets past its AEAD tag)
// and the record inside it (read_locator_record). Byte 0 picks which. An
// accepted value reseals, with the same publisher and nonce, to itself; an
// accepted record is the fixed publisher's (its signature).
// The corpus (fuzz/corpus/locator) was made with the identity of seed 0x11 x 32
// and the pair key 0x33 x 32 below.
#include <algorithm>
#include <cstdint>

#include "discovery/locator.h"

using namespace yonder;
using namespace yonder::discovery;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Identity* self = [] {
    Bytes seed(32, 0x11);
    return new Identity(Identity::from_seed(seed).value());
  }();
  PairKey pair{};
  pair.fill(0x33);
  if (size == 0) return 0;
  ByteView in(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto rec = open_locator(pair, self->public_key(), in);
    if (rec.ok()) {
      LocatorNonce nonce{};
      std::copy(in.begin(), in.begin() + 24, nonce.begin());
      Bytes again = seal_locator(*self, pair, *rec, nonce);
      if (!std::equal(again.begin(), again.end(), in.begin(), in.end())) __builtin_trap();
    }
  } else {
    auto rec = read_locator_record(self->public_key(), in);
    if (rec.ok() && rec->publisher != self->public_key()) __builtin_trap();
  }
  return 0;
}
