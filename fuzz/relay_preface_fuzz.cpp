// Fuzzes the first bytes of a relay pipe connection: the preface decoder
// and the status byte a node reads back. Accepted prefaces re-encode to
// their input.
#include <cstdint>

#include "relay/protocol.h"

using namespace yonder;
using namespace yonder::relay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = decode_pipe_preface(ByteView(data, size));
  if (t.ok()) {
    Bytes again = encode_pipe_preface(*t);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
  }
  if (size > 0) {
    auto st = pipe_status_to_status(data[0]);
    if (st.ok() != (data[0] == 0)) __builtin_trap();
  }
  return 0;
}
