// Fuzzes the group membership decoder (mesh/core/membership.h): never crashes or
// throws; an accepted list re-encodes to text that decodes to the same
// value, and judging it as an update is safe.
#include <cstdint>
#include <string_view>

#include "mesh/core/membership.h"

using namespace yonder;
using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto m = decode_membership(in);
  if (!m.ok()) return 0;
  auto again = decode_membership(encode_membership(*m));
  if (!again.ok() || !(*again == *m)) __builtin_trap();
  auto verdict = judge_membership_update(nullptr, m->owner, *m);
  if (verdict == MembershipVerdict::kAccept && !membership_signature_valid(*m)) __builtin_trap();
  return 0;
}
