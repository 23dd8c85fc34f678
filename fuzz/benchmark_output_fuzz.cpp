// Fuzzes the reader of a known-answer benchmark's stdout (mesh/core/benchmark.h),
// which a provider controls entirely: never crashes or throws, looks at no
// more than its bound, and a time it accepts is finite and not negative (the
// consumer compares n, seed and checksum with what it asked for).
#include <cmath>
#include <cstdint>
#include <string_view>

#include "mesh/core/benchmark.h"

using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto out = parse_benchmark_output(in);
  if (!out) return 0;
  if (out->seconds && (!std::isfinite(*out->seconds) || *out->seconds < 0)) __builtin_trap();
  // The same bytes give the same answer.
  auto again = parse_benchmark_output(in);
  if (!again || again->checksum != out->checksum || again->seed != out->seed) __builtin_trap();
  return 0;
}
