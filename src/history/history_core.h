// The node's measurements over time, as decisions without I/O: how a
// series is named and titled, how stored points are thinned to what a chart
// can show, how byte counters become rates, and what a sample keeps.
//
// A series is one measured quantity with a dotted name (see series_info):
//   gpu.<index>.utilization_percent | memory_used_bytes | memory_total_bytes
//     | temperature_c | power_watts
//   peer.<node_id>.received_bytes_per_s | sent_bytes_per_s
//   job.<job_id>.cpu_percent | memory_bytes | vram_used_bytes | gpu_utilization_percent
// The sampler (history_service.h) measures every interval and stores the
// values (history_store.h); GET /v1/history reads them back for charts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpu/inventory.h"

namespace yonder::history {

struct Point {
  double at_s = 0;  // Unix seconds
  double value = 0;
  bool operator==(const Point&) const = default;
};

struct Sample {
  std::string series;
  double value = 0;
  bool operator==(const Sample&) const = default;
};

// What a series' name says: its unit and a title for a person. `names`
// maps a peer's node id to its name (the title uses it when known).
struct SeriesInfo {
  std::string unit;
  std::string title;
};
std::optional<SeriesInfo> series_info(std::string_view name, const std::map<std::string, std::string>& names = {});

// At most `max_points` points (oldest first) from `points` (oldest first):
// the span is cut into equal time buckets and each non-empty bucket gives
// the mean of its values at the mean of its times. Fewer points than that
// come back as they are; max_points 0 gives none.
std::vector<Point> downsample(std::span<const Point> points, size_t max_points);

// A GPU report as samples (devices the inventory could not read are absent;
// an unknown utilisation, temperature or power is left out, not stored as 0).
std::vector<Sample> gpu_samples(const gpu::InventoryReport& report);

// What one running job used at a sample, as the provider's stats report it.
struct JobUsage {
  std::string job_id;
  double at_s = 0;
  uint64_t cpu_total_ns = 0;  // since the job started
  uint64_t memory_bytes = 0;
  std::optional<uint64_t> vram_used_bytes;  // over its GPUs; unknown when the driver cannot say
  std::optional<int> gpu_utilization_percent;  // the mean over its GPUs that report one
};

// A running job's use from the provider's stats (ProviderJobs::stats'
// JSON); nullopt when it is not that shape.
std::optional<JobUsage> job_usage_from_stats(const nlohmann::json& stats);

// Byte and CPU counters become rates between two samples. A counter that
// went down (a link session ended and another began, a job restarted) is
// read as counting from zero since the last sample.
class RateMeter {
 public:
  // Rates of the counters in `totals` since the last update (none the first
  // time a key is seen, or when no time passed). Keys not seen this time are
  // forgotten.
  std::map<std::string, double> update(double now_s, const std::map<std::string, uint64_t>& totals);

 private:
  struct Last {
    double at_s = 0;
    uint64_t total = 0;
  };
  std::map<std::string, Last> last_;
};

// A link session's bytes, as the link service counts them.
struct PeerTraffic {
  std::string node_id;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

// One sample's worth of measurements as series values. `rates` keeps the
// counters between samples (per-peer bytes, per-job CPU time).
std::vector<Sample> traffic_samples(double now_s, std::span<const PeerTraffic> sessions, RateMeter& rates);
std::vector<Sample> job_samples(std::span<const JobUsage> jobs, RateMeter& cpu);

// Stored points older than this are pruned.
inline double keep_after(double now_s, double keep_s) { return now_s - keep_s; }

}  // namespace yonder::history
