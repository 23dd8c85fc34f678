// Fuzzes the link frame decoder (wire/frame.h), the first parser every byte
// from a peer meets. Checks: the decoder never buffers past its bounds or
// crashes; how the input is split does not change what it decodes or where
// it fails; every frame it accepts re-encodes to the very bytes it came from.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "wire/frame.h"

namespace {

using yonder::ByteView;
using yonder::Bytes;
using yonder::wire::Frame;
using yonder::wire::FrameDecoder;

struct Decoded {
  std::vector<Frame> frames;
  bool failed = false;
  uint64_t fail_offset = 0;
};

// Decodes `input` fed in pieces of the sizes produced by `next_size`.
template <typename NextSize>
Decoded decode(ByteView input, NextSize next_size) {
  Decoded out;
  FrameDecoder d;
  while (!input.empty() && !out.failed) {
    ByteView piece = input.first(std::min(input.size(), next_size()));
    input = input.subspan(piece.size());
    while (!piece.empty()) {
      auto r = d.next(piece);
      if (!r.ok()) {
        out.failed = true;
        out.fail_offset = d.offset();
        break;
      }
      if (!r->has_value()) break;
      out.frames.push_back(std::move(**r));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView input(data, size);
  Decoded whole = decode(input, [] { return SIZE_MAX; });
  Decoded bytewise = decode(input, [] { return size_t{1}; });
  uint32_t x = size;
  Decoded ragged = decode(input, [&x] {
    x = x * 1103515245u + 12345u;
    return size_t{1} + (x >> 16) % 97;
  });
  for (const Decoded* other : {&bytewise, &ragged}) {
    if (other->frames != whole.frames || other->failed != whole.failed || other->fail_offset != whole.fail_offset) {
      __builtin_trap();
    }
  }
  // Accepted frames re-encode to exactly the input's prefix they came from.
  Bytes again;
  for (const Frame& f : whole.frames) yonder::wire::encode(f, again);
  if (again.size() > size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
  return 0;
}
