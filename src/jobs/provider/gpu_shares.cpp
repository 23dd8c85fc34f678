#include "jobs/provider/gpu_shares.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "crypto/scope.h"  // parse_resource_size

namespace yonder::jobs::provider {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

std::string mib(uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

// The request as the user put it.
std::string asked(const ShareRequest& r) {
  if (r.vram_bytes > 0) return mib(r.vram_bytes) + " of VRAM";
  return std::to_string(r.permille / 10) + "." + std::to_string(r.permille % 10) + "% of a GPU's memory";
}

const ShareConfig* config_of(const std::vector<ShareConfig>& config, const std::string& uuid) {
  for (const auto& c : config) {
    if (c.uuid == uuid && c.max_jobs > 0) return &c;
  }
  return nullptr;
}

struct Use {
  int jobs = 0;
  uint64_t bytes = 0;
};

std::map<std::string, Use> use_of(const std::vector<ShareHolding>& shares) {
  std::map<std::string, Use> use;
  for (const auto& s : shares) {
    ++use[s.uuid].jobs;
    use[s.uuid].bytes += s.vram_bytes;
  }
  return use;
}

}  // namespace

uint64_t share_bytes(const ShareRequest& request, const GpuSlot& device) {
  if (request.vram_bytes > 0) return request.vram_bytes;
  uint64_t permille = std::min<uint64_t>(request.permille, 1000);
  // memory * permille / 1000 without overflow, rounded up to a MiB.
  uint64_t bytes = device.memory_total_bytes / 1000 * permille + device.memory_total_bytes % 1000 * permille / 1000;
  bytes = (bytes + kMiB - 1) / kMiB * kMiB;
  return request.max_bytes > 0 ? std::min(bytes, request.max_bytes) : bytes;
}

Result<std::vector<ShareRule>> parse_share_setting(std::string_view text) {
  std::vector<ShareRule> rules;
  auto bad = [](std::string_view entry, const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument,
                      "gpu.share: \"" + std::string(entry.substr(0, 80)) + "\" " + why +
                          "; write DEVICE:JOBS[:RESERVE] entries separated by commas, e.g. all:4:2G or 0:2,1:4");
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view entry = text.substr(start, comma - start);
    start = comma + 1;
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (entry.empty()) continue;
    if (rules.size() >= 64) return bad(entry, "is past the 64th entry");
    size_t c1 = entry.find(':');
    if (c1 == std::string_view::npos || c1 == 0) return bad(entry, "has no DEVICE:JOBS");
    size_t c2 = entry.find(':', c1 + 1);
    ShareRule rule;
    rule.device = std::string(entry.substr(0, c1));
    bool uuid = rule.device.rfind("GPU-", 0) == 0 && rule.device.size() <= 96;
    bool index = rule.device.size() <= 3 &&
                 std::all_of(rule.device.begin(), rule.device.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (rule.device != "all" && !uuid && !index) return bad(entry, "names no device (all, an index, or GPU-...)");
    std::string_view jobs = entry.substr(c1 + 1, (c2 == std::string_view::npos ? entry.size() : c2) - c1 - 1);
    if (jobs.empty() || jobs.size() > 2 ||
        !std::all_of(jobs.begin(), jobs.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return bad(entry, "has no number of jobs (0 to 64)");
    }
    rule.max_jobs = std::stoi(std::string(jobs));
    if (rule.max_jobs > 64) return bad(entry, "shares a device more than 64 ways");
    if (c2 != std::string_view::npos) {
      auto reserve = parse_resource_size(entry.substr(c2 + 1), "gpu.share's RESERVE");
      if (!reserve) return bad(entry, reserve.error().message());
      rule.reserve_bytes = *reserve;
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::vector<ShareConfig> share_configs(const std::vector<ShareRule>& rules, const GpuView& gpus) {
  std::vector<ShareConfig> out;
  for (size_t i = 0; i < gpus.devices.size(); ++i) {
    const GpuSlot& dev = gpus.devices[i];
    ShareConfig c{dev.uuid, 0, 0};
    for (const auto& r : rules) {
      if (r.device == "all" || r.device == dev.uuid || r.device == std::to_string(i)) {
        c.max_jobs = r.max_jobs;
        c.reserve_bytes = r.reserve_bytes;
      }
    }
    if (c.max_jobs > 0) out.push_back(std::move(c));
  }
  return out;
}

uint32_t share_permille_of(uint64_t bytes, const GpuSlot& device) {
  if (device.memory_total_bytes == 0) return 1000;
  // bytes * 1000 / total, rounded up, without overflow (bytes < 2^54 in practice; clamp anyway).
  uint64_t b = std::min(bytes, device.memory_total_bytes);
  uint64_t permille = (b / device.memory_total_bytes) * 1000 +
                      ((b % device.memory_total_bytes) * 1000 + device.memory_total_bytes - 1) / device.memory_total_bytes;
  return static_cast<uint32_t>(std::clamp<uint64_t>(permille, 1, 1000));
}

uint64_t share_capacity(const ShareConfig& config, const GpuSlot& device) {
  if (config.max_jobs <= 0 || config.reserve_bytes >= device.memory_total_bytes) return 0;
  return device.memory_total_bytes - config.reserve_bytes;
}

ShareDecision pick_share(const GpuView& gpus, const std::vector<ShareConfig>& config, const LeaseMap& whole,
                         const std::vector<ShareHolding>& shares, const std::set<std::string>& reserved,
                         const ShareRequest& request) {
  ShareDecision d;
  if (!gpus.usable) {
    d.reason = "this job asks for a share of a GPU but this provider has none to lend: " + gpus.unusable_reason;
    return d;
  }
  if (request.vram_bytes == 0 && request.permille == 0) {
    d.reason = "this job asks for a share of a GPU without saying how much VRAM; ask for --vram SIZE or --gpus 0.N";
    return d;
  }
  const std::map<std::string, Use> use = use_of(shares);
  bool any_shared = false;
  bool ever = false;           // some shared device could hold it once free
  uint64_t largest = 0;        // the largest share any shared device could ever hold
  bool held_back = false;      // it would fit now on a device held back for a whole-GPU job
  bool full_by_count = false;  // it would fit by VRAM on a device that has its number of shares
  uint64_t freest = 0;         // the most VRAM free now on a device it could ever fit on
  // (leftover after it, shares there, inventory index): the smallest wins.
  std::optional<std::tuple<uint64_t, int, size_t>> best;
  for (size_t i = 0; i < gpus.devices.size(); ++i) {
    const GpuSlot& dev = gpus.devices[i];
    const ShareConfig* c = config_of(config, dev.uuid);
    if (c == nullptr) continue;
    uint64_t capacity = share_capacity(*c, dev);
    if (capacity == 0) continue;
    any_shared = true;
    largest = std::max(largest, capacity);
    uint64_t need = share_bytes(request, dev);
    if (need > capacity) continue;
    ever = true;
    auto u = use.find(dev.uuid);
    Use now = u == use.end() ? Use{} : u->second;
    uint64_t free = whole.count(dev.uuid) ? 0 : capacity - std::min(capacity, now.bytes);
    freest = std::max(freest, free);
    if (whole.count(dev.uuid) || need > free) continue;
    if (now.jobs >= c->max_jobs) {
      full_by_count = true;
      continue;
    }
    if (reserved.count(dev.uuid)) {
      held_back = true;
      continue;
    }
    auto key = std::make_tuple(free - need, -now.jobs, i);
    if (!best || key < *best) {
      best = key;
      d.uuid = dev.uuid;
      d.vram_bytes = need;
    }
  }
  if (best) {
    d.fit = Fit::kNow;
    return d;
  }
  d.uuid.clear();
  if (!any_shared) {
    d.reason = "this job asks for a share of a GPU, but this provider shares none of its GPUs (the provider sets "
               "gpu.share); ask for a whole GPU with --gpus 1";
    return d;
  }
  if (!ever) {
    d.reason = "this job asks for " + asked(request) + " on a shared GPU, but the most a shared GPU here holds is " +
               mib(largest) + "; ask for --vram " + std::to_string(largest / kMiB) +
               "M or less, or for a whole GPU with --gpus 1";
    return d;
  }
  d.fit = Fit::kLater;
  if (held_back) {
    d.reason = "waiting for a shared GPU: the ones it fits on now are held back for a whole-GPU job that waits "
               "ahead of it";
  } else if (full_by_count) {
    d.reason = "waiting for a place on a shared GPU: the ones with room for " + asked(request) +
               " run as many jobs at once as the provider shares them with (gpu.share)";
  } else {
    d.reason = "waiting for " + asked(request) + " on a shared GPU (the most free on one now: " + mib(freest) + ")";
  }
  return d;
}

std::vector<std::string> reserve_for_whole(const GpuView& gpus, const LeaseMap& whole,
                                           const std::vector<ShareHolding>& shares,
                                           const std::set<std::string>& reserved, int count,
                                           uint64_t min_memory_bytes) {
  const std::map<std::string, Use> use = use_of(shares);
  // (shares there, VRAM they use, inventory index): idle devices first.
  std::vector<std::tuple<int, uint64_t, size_t>> candidates;
  for (size_t i = 0; i < gpus.devices.size(); ++i) {
    const GpuSlot& dev = gpus.devices[i];
    if (dev.memory_total_bytes < min_memory_bytes || whole.count(dev.uuid) || reserved.count(dev.uuid)) continue;
    auto u = use.find(dev.uuid);
    Use now = u == use.end() ? Use{} : u->second;
    candidates.emplace_back(now.jobs, now.bytes, i);
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> out;
  for (const auto& [jobs, bytes, i] : candidates) {
    if (static_cast<int>(out.size()) >= count) break;
    out.push_back(gpus.devices[i].uuid);
  }
  return out;
}

}  // namespace yonder::jobs::provider
