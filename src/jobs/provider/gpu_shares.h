// GPU shares: several jobs on one device, each with a VRAM budget. Pure (no
// I/O, nothing that locks or reads a clock), like gpu_leases.h beside it;
// queue_core.h calls it in its pass.
//
// What a provider lends this way: the devices it marks shareable (gpu.share:
// per device, how many jobs at once and how much VRAM it keeps back for the
// driver and itself). A share asks for VRAM, either in bytes (`--vram 8G`)
// or as a fraction of the device it lands on (`--gpus 0.5`: half its
// memory); either way it is held as bytes once placed.
//
// The rules:
//   - A device is leased either whole (one job, exclusive: gpu_leases.h) or
//     shared, never both: a whole-GPU job waits for a device with no shares
//     on it, and a share never lands on a device leased whole.
//   - No over-commit: on a shared device the shares' VRAM stays within
//     capacity (its memory less what the provider keeps back), and their
//     number within its `max_jobs`.
//   - Placement is best fit: of the devices where the share fits now, the
//     one it leaves the least VRAM free on (so large holes stay for large
//     shares and idle devices stay idle for whole-GPU jobs); ties go to the
//     device with more shares already, then to inventory order.
//   - Never starve a whole-GPU job (reserve_for_whole): when a whole-GPU job
//     waits, the devices it will get are held back from new shares: the
//     idle ones first, then the shared ones with the fewest shares (then the
//     least VRAM used, then inventory order), as many as it asks for. Shares
//     already on them run to their end; as they end, the device drains, and
//     the whole-GPU job starts once its devices are empty. Shares go on
//     landing on the other shared devices. Jobs ahead of it in the queue are
//     not held back (FIFO), and whole-GPU jobs among themselves keep the
//     queue's no-reservation rule (queue_core.h, rule 3).
//   - Refusal is for good: a share is refused only when no device this
//     provider shares could ever hold it, saying the largest it could.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "jobs/provider/gpu_leases.h"

namespace yonder::jobs::provider {

// gpu.share for one device.
struct ShareConfig {
  std::string uuid;
  int max_jobs = 0;            // shares at once on it; 0: not shared
  uint64_t reserve_bytes = 0;  // VRAM the provider keeps back
  bool operator==(const ShareConfig&) const = default;
};

// What a share job asks for: `vram_bytes` when set, else `permille` of the
// device's memory (500: half), but never more than `max_bytes` when that is
// set (the VRAM cap of the peer's scope, `yonder scope PEER --vram`).
struct ShareRequest {
  uint64_t vram_bytes = 0;
  uint32_t permille = 0;
  uint64_t max_bytes = 0;
  bool operator==(const ShareRequest&) const = default;
};

// One entry of the gpu.share setting, as the operator wrote it.
struct ShareRule {
  std::string device;          // "all", an index ("0") or a uuid ("GPU-...")
  int max_jobs = 0;            // 0: this device is not shared
  uint64_t reserve_bytes = 0;
  bool operator==(const ShareRule&) const = default;
};

// gpu.share: comma-separated DEVICE:JOBS[:RESERVE]. DEVICE is `all`, an
// index (`0`) or a uuid (`GPU-...`); JOBS, 0 to 64, how many shares at
// once (0: not shared); RESERVE, VRAM kept back from shares with its unit
// (`2G`, `512M`; none by default). A later entry for a device wins over an
// earlier one: `all:2,1:4` shares device 1 four ways and the others two.
// "" shares nothing. kInvalidArgument names the entry and the form.
Result<std::vector<ShareRule>> parse_share_setting(std::string_view text);

// The rules applied to the devices as probed (rules naming no device here
// are ignored: a GPU may be missing today).
std::vector<ShareConfig> share_configs(const std::vector<ShareRule>& rules, const GpuView& gpus);

// A share placed: its job, its device, its budget.
struct ShareHolding {
  std::string job_id;
  std::string uuid;
  uint64_t vram_bytes = 0;
  bool operator==(const ShareHolding&) const = default;
};

// The VRAM a request needs on `device` (its fraction rounded up to a MiB).
uint64_t share_bytes(const ShareRequest& request, const GpuSlot& device);

// What part of `device` a budget of `bytes` is, in thousandths rounded up
// (1 to 1000): how a share's time is metered (a receipt's GPU-seconds).
uint32_t share_permille_of(uint64_t bytes, const GpuSlot& device);

// What a device offers to shares: its memory less what is kept back (0: not
// shared, or all of it kept back).
uint64_t share_capacity(const ShareConfig& config, const GpuSlot& device);

struct ShareDecision {
  Fit fit = Fit::kNever;
  std::string uuid;         // kNow: the device
  uint64_t vram_bytes = 0;  // kNow: its budget there
  std::string reason;       // kLater, kNever: for the user
  bool operator==(const ShareDecision&) const = default;
};

// Where `request` goes now. `whole`: devices leased whole (uuid -> job);
// `shares`: the shares placed; `reserved`: devices held back for whole-GPU
// jobs that wait.
ShareDecision pick_share(const GpuView& gpus, const std::vector<ShareConfig>& config, const LeaseMap& whole,
                         const std::vector<ShareHolding>& shares, const std::set<std::string>& reserved,
                         const ShareRequest& request);

// The devices a waiting whole-GPU job (`count` devices with at least
// `min_memory_bytes`) holds back from new shares, by the rule above; none
// already leased whole or in `reserved`.
std::vector<std::string> reserve_for_whole(const GpuView& gpus, const LeaseMap& whole,
                                           const std::vector<ShareHolding>& shares,
                                           const std::set<std::string>& reserved, int count,
                                           uint64_t min_memory_bytes);

}  // namespace yonder::jobs::provider
