// What a paired peer may do on this provider, and within which limits. It
// travels inside share links (signed by the provider) and is stored with each
// pinned peer; the provider checks it on every request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace yonder {

enum class Capability : uint8_t {
  kRun = 1 << 0,
  kExec = 1 << 1,
  kForward = 1 << 2,
  kFiles = 1 << 3,
  kMesh = 1 << 4,
  // Remote CUDA sessions: the peer's program drives this provider's GPU
  // through driver calls (src/gpu/remote). Off unless granted.
  kCuda = 1 << 5,
};

struct Scope {
  uint8_t capabilities = static_cast<uint8_t>(Capability::kRun);
  // Limits; 0 means "the provider's own default/maximum".
  uint16_t gpus = 1;
  uint64_t vram_bytes = 0;
  uint32_t max_time_s = 2 * 3600;
  uint16_t max_jobs = 1;
  uint32_t cpus_milli = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_bytes = 0;
  bool egress = false;

  bool allows(Capability c) const { return (capabilities & static_cast<uint8_t>(c)) != 0; }
  bool operator==(const Scope&) const = default;

  // "run,exec" form.
  std::string capabilities_text() const;
  // One line for people: "run,exec; 1 GPU, 20 GiB VRAM, 2h, 1 job, no egress".
  std::string summary() const;
};

// What both scopes allow: the capabilities of both, each limit the smaller
// (0, "the provider's maximum", counts as the larger), egress only if both.
Scope narrower_of(const Scope& a, const Scope& b);

// Parses "run,exec,forward,files" (also "mesh", "cuda"); unknown names are errors
// listing the known ones.
Result<uint8_t> parse_capabilities(std::string_view text);
// "20G", "512M", "1T", "1024" (bytes); binary units.
Result<uint64_t> parse_size(std::string_view text);
// A job's or a scope's memory, VRAM or disk ("20G", "512M"): the unit is
// required and the size is at least 1 MiB, so `--vram 20` is refused with
// the fix rather than read as 20 bytes (which rounds to no limit at all).
// `flag` names the option in the error.
Result<uint64_t> parse_resource_size(std::string_view text, std::string_view flag);
// "90s", "30m", "2h", "1d".
Result<uint32_t> parse_duration_s(std::string_view text);
std::string format_size(uint64_t bytes);
std::string format_duration(uint64_t seconds);

nlohmann::json scope_to_json(const Scope& s);
Result<Scope> scope_from_json(const nlohmann::json& j);

}  // namespace yonder
