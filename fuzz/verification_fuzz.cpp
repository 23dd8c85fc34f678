// Fuzzes the verification and opinions decoders (mesh/core/verification.h):
// never crashes or throws; an accepted verification re-encodes to text that
// decodes to the same value; accepted opinions re-encode within the bound
// and decode to the same items; verifying signatures is safe.
#include <cstdint>
#include <string_view>

#include "mesh/core/verification.h"

using namespace yonder;
using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto v = decode_verification(in); v.ok()) {
    auto again = decode_verification(encode_verification(*v));
    if (!again.ok() || !(*again == *v)) __builtin_trap();
    (void)verify_verification(*v);
  }
  if (auto o = decode_opinions(in); o.ok()) {
    std::string text = encode_opinions(*o);
    if (text.size() > kMaxOpinionsBytes) __builtin_trap();
    auto again = decode_opinions(text);
    if (!again.ok() || again->receipts != o->receipts || again->verifications != o->verifications) __builtin_trap();
    PeerKey sender{};
    if (!o->receipts.empty()) sender = o->receipts.front().provider;
    (void)verified_opinions(std::move(*o), sender);
  }
  return 0;
}
