// The provider queue's pure core (jobs/provider/queue_core.h), one core, no
// I/O: how long one scheduling pass takes for a queue of Q jobs from P
// peers on a provider with G GPUs and A jobs running, and how that grows
// with Q. ProviderJobs runs a pass under its lock on every submit, stop
// and job end, so the pass is what every caller waits behind; the I/O of a
// pass (an NVML probe, statvfs) is not in these numbers.
//
// The queue mixes CPU jobs, one-GPU and two-GPU jobs, some with a disk
// promise, and a queue order policy's answer on every other pass; the
// devices are mostly held, so most jobs are looked at and wait (the slow
// case: with free slots and devices a pass ends as soon as the slots fill).
// Each size runs twice: whole GPUs only (the anchor), then with every device
// shared (gpu.share: 4 jobs, 2 GiB kept back), three shares placed on each
// held one, and half the queue asking for shares (2 to 16 GiB, or a
// fraction); the ratio is the cost of share placement and of holding
// devices back for whole-GPU jobs.
//
//   queue_core_bench                  small sizes (ctest, label bench)
//   queue_core_bench --full           queues of 100, 1,000 and 10,000 jobs
//   queue_core_bench --queued=N --passes=N
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "jobs/provider/queue_core.h"

using namespace yonder::jobs::provider;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kGiB = 1ULL << 30;

QueueSnapshot make_snapshot(size_t queued, size_t gpus, std::mt19937_64& rng, bool shares) {
  QueueSnapshot s;
  s.now = MonoTime{} + std::chrono::hours(1000);
  s.max_per_peer = 2;
  GpuView view;
  view.usable = true;
  for (size_t i = 0; i < gpus; ++i) view.devices.push_back({"GPU-" + std::to_string(i), "FAKE GPU", 24 * kGiB});
  s.gpus = view;
  // Every device but one held, by jobs of distinct peers.
  for (size_t i = 0; i + 1 < gpus; ++i) {
    ActiveJob a;
    a.job_id = "active-" + std::to_string(i);
    a.peer_id = "holder-" + std::to_string(i);
    a.running = true;
    a.deadline = s.now + std::chrono::seconds(60 + static_cast<int64_t>(rng() % 3600));
    a.gpu_uuids = {"GPU-" + std::to_string(i)};
    a.vram_limited = rng() % 2 == 0;
    if (shares) {
      for (int k = 0; k < 3; ++k) {
        ActiveJob share = a;
        share.job_id = a.job_id + "-share-" + std::to_string(k);
        share.share_vram_bytes = (4 + static_cast<uint64_t>(k) * 2) * kGiB;
        s.active.push_back(std::move(share));
      }
      continue;
    }
    s.active.push_back(std::move(a));
  }
  if (shares) {
    for (size_t i = 0; i < gpus; ++i) s.gpu_shares.push_back({"GPU-" + std::to_string(i), 4, 2 * kGiB});
  }
  s.max_concurrent = static_cast<int>(s.active.size()) + 5;  // room for five more either way
  for (size_t i = 0; i < queued; ++i) {
    WaitingJob w;
    w.job_id = "job-" + std::to_string(i);
    w.peer_id = "peer-" + std::to_string(rng() % 50);
    w.gpus = rng() % 4 == 0 ? 0 : 1 + static_cast<int>(rng() % 2);
    w.disk_bytes = (rng() % 4) * kGiB;
    if (shares && rng() % 2 == 0) {
      w.gpus = 0;
      w.share = rng() % 3 == 0 ? ShareRequest{0, static_cast<uint32_t>(100 + rng() % 600), 0}
                               : ShareRequest{(2 + rng() % 15) * kGiB, 0, 0};
    }
    s.queue.push_back(std::move(w));
  }
  DiskSnapshot d;
  d.free_bytes = 500 * kGiB;
  d.reserve_bytes = 2 * kGiB;
  s.disk = d;
  s.vram_sample_at = s.now + std::chrono::seconds(2);
  return s;
}

double pct(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

// One size: passes per second.
double run(size_t queued, size_t gpus, size_t passes, bool shares) {
  std::mt19937_64 rng(queued * 31 + gpus);
  QueueSnapshot s = make_snapshot(queued, gpus, rng, shares);
  std::vector<std::string> preferred;
  for (const auto& w : s.queue) preferred.push_back(w.job_id);
  std::shuffle(preferred.begin(), preferred.end(), rng);
  std::vector<double> us;
  us.reserve(passes);
  size_t decided = 0;
  auto t0 = Clock::now();
  for (size_t i = 0; i < passes; ++i) {
    if (i % 2 == 1) {
      s.preferred_order = preferred;
    } else {
      s.preferred_order.reset();
    }
    auto a = Clock::now();
    QueuePlan plan = plan_queue(s);
    auto b = Clock::now();
    decided += plan.actions.size();
    us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("queue %6zu jobs, %2zu GPUs, %2zu running%s: %9.0f passes/s  p50 %8.1f us  p99 %8.1f us  (%zu actions/pass)\n",
              queued, gpus, s.active.size(), shares ? ", shared" : "", static_cast<double>(passes) / total_s,
              pct(us, 0.5), pct(us, 0.99), passes ? decided / passes : 0);
  return static_cast<double>(passes) / total_s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {10, 100};
  size_t passes = 200;
  size_t gpus = 8;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--full") == 0) {
      sizes = {100, 1000, 10000};
      passes = 2000;
    } else if (std::strncmp(argv[i], "--queued=", 9) == 0) {
      sizes = {static_cast<size_t>(std::stoull(argv[i] + 9))};
    } else if (std::strncmp(argv[i], "--passes=", 9) == 0) {
      passes = static_cast<size_t>(std::stoull(argv[i] + 9));
    } else if (std::strncmp(argv[i], "--gpus=", 7) == 0) {
      gpus = std::max<size_t>(1, static_cast<size_t>(std::stoull(argv[i] + 7)));
    } else {
      std::fprintf(stderr, "usage: queue_core_bench [--full] [--queued=N] [--passes=N] [--gpus=N]\n");
      return 2;
    }
  }
  for (size_t q : sizes) {
    double whole = run(q, gpus, passes, false);
    double shared = run(q, gpus, passes, true);
    std::printf("  shares / whole GPUs only: %.2f of the passes per second\n", shared / whole);
  }
  return 0;
}
