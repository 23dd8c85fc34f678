// A histogram of durations in the shape Prometheus expects (cumulative
// buckets with fixed upper bounds in seconds, a count and a sum), cheap
// enough to record on any hot-ish path: one relaxed atomic add per bucket
// hit, count and sum, no lock, no allocation. Any thread may observe() and
// snapshot() at once; a snapshot taken during an observe may see the sample
// in its bucket but not yet in the sum, which scrapers tolerate (the count
// is derived from the buckets, so count and buckets always agree).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace yonder {

class LatencyHistogram {
 public:
  // Upper bounds in seconds: 5 ms (a cached image's docker create) to 5 min
  // (an image pull or a busy Slurm controller). Samples above the last fall
  // in +Inf.
  static constexpr std::array<double, 15> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                     2.5,   5,    10,    30,   60,  120,  300};

  void observe(std::chrono::nanoseconds d) {
    double s = std::chrono::duration<double>(d).count();
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(d.count() > 0 ? static_cast<uint64_t>(d.count()) : 0, std::memory_order_relaxed);
  }

  struct Snapshot {
    std::array<uint64_t, kBounds.size()> cumulative{};  // samples <= kBounds[i]
    uint64_t count = 0;                                 // all samples (the +Inf bucket)
    double sum_seconds = 0;
  };
  Snapshot snapshot() const {
    Snapshot out;
    uint64_t running = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
      running += buckets_[i].load(std::memory_order_relaxed);
      out.cumulative[i] = running;
    }
    out.count = running + buckets_[kBounds.size()].load(std::memory_order_relaxed);
    out.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
    return out;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // per bucket, not cumulative; last: +Inf
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace yonder
