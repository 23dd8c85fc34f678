// Fuzzes what an array job reads back: its stored state (mesh/core/work_units.h
// ArrayRun::from_json, written by the daemon but read after crashes and disk
// trouble) and Slurm-style ranges typed by people (parse_array_range).
// Never crashes or throws; accepted state re-serialises to JSON that loads
// to the same JSON; an accepted range is within kMaxArrayTasks.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mesh/core/work_units.h"

using namespace yonder::mesh;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  if (size < 64) {
    ArraySpec spec;
    if (parse_array_range(text, spec).ok() && (spec.tasks == 0 || spec.tasks > kMaxArrayTasks)) __builtin_trap();
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  auto run = ArrayRun::from_json(j);
  if (!run.ok()) return 0;
  nlohmann::json saved = run->to_json();
  auto again = ArrayRun::from_json(saved);
  if (!again.ok() || again->to_json() != saved) __builtin_trap();
  return 0;
}
