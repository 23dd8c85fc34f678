// GPU shares (gpu_shares.h) and the queue's use of them (queue_core.h):
// examples of each rule, then a seeded simulation in steps (jobs arrive,
// start, end) checking that no device is ever over-committed or both shared
// and leased whole, and that a stream of shares never starves a whole-GPU
// job. queue_core_test's purity check covers gpu_shares.{h,cpp} too.
#include "jobs/provider/gpu_shares.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "jobs/provider/queue_core.h"

namespace yonder::jobs::provider {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kMiB = 1ULL << 20;
const MonoTime kNow = MonoTime{} + 1000h;

GpuView devices(std::vector<uint64_t> memory) {
  GpuView v;
  v.usable = true;
  for (size_t i = 0; i < memory.size(); ++i) v.devices.push_back({"GPU-" + std::to_string(i), "FAKE GPU", memory[i]});
  return v;
}

std::vector<ShareConfig> shared(const GpuView& v, int max_jobs, uint64_t reserve = 0) {
  std::vector<ShareConfig> out;
  for (const auto& d : v.devices) out.push_back({d.uuid, max_jobs, reserve});
  return out;
}

ShareRequest vram(uint64_t bytes) { return {bytes, 0, 0}; }
ShareRequest fraction(uint32_t permille) { return {0, permille, 0}; }

TEST(ShareBytes, BytesAsAskedOrTheFractionOfTheDeviceRoundedUpToAMiB) {
  GpuSlot dev{"GPU-0", "FAKE GPU", 24 * kGiB};
  EXPECT_EQ(share_bytes(vram(8 * kGiB), dev), 8 * kGiB);
  EXPECT_EQ(share_bytes(fraction(500), dev), 12 * kGiB);
  EXPECT_EQ(share_bytes(fraction(1000), dev), 24 * kGiB);
  EXPECT_EQ(share_bytes(fraction(5000), dev), 24 * kGiB);  // never more than the device
  GpuSlot odd{"GPU-1", "", 1000 * kMiB + 1};
  EXPECT_EQ(share_bytes(fraction(333), odd) % kMiB, 0u);
  EXPECT_GE(share_bytes(fraction(333), odd), (1000 * kMiB + 1) / 1000 * 333);
  EXPECT_EQ(share_capacity({"GPU-0", 2, 4 * kGiB}, dev), 20 * kGiB);
  EXPECT_EQ(share_capacity({"GPU-0", 0, 0}, dev), 0u);          // not shared
  EXPECT_EQ(share_capacity({"GPU-0", 2, 30 * kGiB}, dev), 0u);  // all kept back
}

TEST(ShareBytes, AFractionUnderACapGetsNoMoreThanTheCap) {
  GpuSlot dev{"GPU-0", "FAKE GPU", 80 * kGiB};
  EXPECT_EQ(share_bytes({0, 500, 12 * kGiB}, dev), 12 * kGiB);
  EXPECT_EQ(share_bytes({0, 100, 12 * kGiB}, dev), 8 * kGiB);  // under the cap: the fraction
  EXPECT_EQ(share_bytes({4 * kGiB, 0, 0}, dev), 4 * kGiB);
}

TEST(ShareBytes, APartOfADeviceInThousandthsRoundedUp) {
  GpuSlot dev{"GPU-0", "FAKE GPU", 24 * kGiB};
  EXPECT_EQ(share_permille_of(12 * kGiB, dev), 500u);
  EXPECT_EQ(share_permille_of(8 * kGiB, dev), 334u);  // 333.3
  EXPECT_EQ(share_permille_of(1, dev), 1u);
  EXPECT_EQ(share_permille_of(48 * kGiB, dev), 1000u);
  EXPECT_EQ(share_permille_of(kGiB, GpuSlot{"GPU-x", "", 0}), 1000u);
}

TEST(ShareSetting, EntriesApplyInOrderToEveryDeviceByIndexOrUuid) {
  auto rules = parse_share_setting("all:2:1G, 1:4, GPU-2:0");
  ASSERT_TRUE(rules.ok()) << rules.error().to_string();
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ((*rules)[0], (ShareRule{"all", 2, kGiB}));
  auto cfg = share_configs(*rules, devices({24 * kGiB, 24 * kGiB, 24 * kGiB, 24 * kGiB}));
  ASSERT_EQ(cfg.size(), 3u);  // GPU-2 is not shared
  EXPECT_EQ(cfg[0], (ShareConfig{"GPU-0", 2, kGiB}));
  EXPECT_EQ(cfg[1], (ShareConfig{"GPU-1", 4, 0}));  // the later entry wins, reserve and all
  EXPECT_EQ(cfg[2], (ShareConfig{"GPU-3", 2, kGiB}));
  EXPECT_TRUE(parse_share_setting("")->empty());
  EXPECT_TRUE(share_configs(*parse_share_setting("GPU-gone:4"), devices({kGiB})).empty());
  struct Case {
    const char* text;
    const char* says;
  };
  for (auto c : {Case{"all", "has no DEVICE:JOBS"}, Case{"all:x", "no number of jobs"}, Case{"all:65", "64 ways"},
                 Case{"gpu0:2", "names no device"}, Case{"all:2:2", "has no unit"}, Case{":2", "has no DEVICE:JOBS"},
                 Case{"all:2:lots", "size"}}) {
    auto r = parse_share_setting(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message().find(c.says), std::string::npos) << c.text << " -> " << r.error().message();
    EXPECT_NE(r.error().message().find("DEVICE:JOBS[:RESERVE]"), std::string::npos) << "the form, for the fix";
  }
}

TEST(PickShare, BestFitByVramNeverOnADeviceLeasedWholeOrPastItsCapacityOrCount) {
  GpuView v = devices({24 * kGiB, 24 * kGiB, 24 * kGiB});
  auto cfg = shared(v, 3, 4 * kGiB);  // 20 GiB to share on each
  std::vector<ShareHolding> holding = {{"a", "GPU-1", 12 * kGiB}, {"b", "GPU-2", 4 * kGiB}};
  // 6 GiB fits on all three; GPU-1 leaves the least free after it (2 GiB).
  auto d = pick_share(v, cfg, {}, holding, {}, vram(6 * kGiB));
  EXPECT_EQ(d.fit, Fit::kNow);
  EXPECT_EQ(d.uuid, "GPU-1");
  EXPECT_EQ(d.vram_bytes, 6 * kGiB);
  // 10 GiB no longer fits on GPU-1: GPU-2 (6 GiB left after it), not the idle GPU-0.
  EXPECT_EQ(pick_share(v, cfg, {}, holding, {}, vram(10 * kGiB)).uuid, "GPU-2");
  // GPU-2 leased whole: the idle GPU-0 then.
  EXPECT_EQ(pick_share(v, cfg, {{"GPU-2", "w"}}, holding, {}, vram(10 * kGiB)).uuid, "GPU-0");
  // Each device at its count: it waits, saying so.
  std::vector<ShareHolding> full;
  for (int i = 0; i < 3; ++i) {
    for (const auto& dev : v.devices) full.push_back({"f" + dev.uuid + std::to_string(i), dev.uuid, kGiB});
  }
  auto count = pick_share(v, cfg, {}, full, {}, vram(kGiB));
  EXPECT_EQ(count.fit, Fit::kLater);
  EXPECT_NE(count.reason.find("as many jobs at once"), std::string::npos) << count.reason;
  // No room by VRAM anywhere now: it waits, naming the most free.
  std::vector<ShareHolding> big = {{"x", "GPU-0", 18 * kGiB}, {"y", "GPU-1", 17 * kGiB}, {"z", "GPU-2", 19 * kGiB}};
  auto later = pick_share(v, cfg, {}, big, {}, vram(4 * kGiB));
  EXPECT_EQ(later.fit, Fit::kLater);
  EXPECT_NE(later.reason.find("the most free on one now: 3072 MiB"), std::string::npos) << later.reason;
}

TEST(PickShare, RefusedOnlyWhenNoSharedDeviceCouldEverHoldItSayingTheMost) {
  GpuView v = devices({24 * kGiB, 80 * kGiB});
  std::vector<ShareConfig> cfg = {{"GPU-0", 2, 4 * kGiB}};  // GPU-1 is not shared
  auto too_big = pick_share(v, cfg, {}, {}, {}, vram(40 * kGiB));
  EXPECT_EQ(too_big.fit, Fit::kNever);
  EXPECT_NE(too_big.reason.find("the most a shared GPU here holds is 20480 MiB"), std::string::npos) << too_big.reason;
  EXPECT_NE(too_big.reason.find("--vram 20480M"), std::string::npos) << too_big.reason;
  EXPECT_EQ(pick_share(v, cfg, {}, {}, {}, fraction(900)).fit, Fit::kNever);  // 21.6 GiB of GPU-0 > 20
  EXPECT_EQ(pick_share(v, cfg, {}, {}, {}, fraction(800)).fit, Fit::kNow);
  auto none = pick_share(v, {}, {}, {}, {}, vram(kGiB));
  EXPECT_EQ(none.fit, Fit::kNever);
  EXPECT_NE(none.reason.find("shares none of its GPUs"), std::string::npos) << none.reason;
  EXPECT_NE(none.reason.find("--gpus 1"), std::string::npos) << none.reason;
  GpuView broken;
  broken.unusable_reason = "no driver";
  EXPECT_NE(pick_share(broken, cfg, {}, {}, {}, vram(kGiB)).reason.find("no driver"), std::string::npos);
  EXPECT_EQ(pick_share(v, cfg, {}, {}, {}, ShareRequest{}).fit, Fit::kNever);
  // Leased whole now is no reason to refuse: it waits.
  EXPECT_EQ(pick_share(v, cfg, {{"GPU-0", "w"}}, {}, {}, vram(kGiB)).fit, Fit::kLater);
}

TEST(ReserveForWhole, IdleDevicesFirstThenTheFewestSharesThenTheLeastVramNeverOnesLeasedOrReserved) {
  GpuView v = devices({24 * kGiB, 24 * kGiB, 24 * kGiB, 24 * kGiB, 8 * kGiB});
  std::vector<ShareHolding> holding = {{"a", "GPU-0", kGiB}, {"b", "GPU-0", kGiB}, {"c", "GPU-1", 2 * kGiB},
                                       {"d", "GPU-3", kGiB}};
  // GPU-2 is idle; of the shared ones GPU-3 (one share, 1 GiB) before GPU-1
  // (one share, 2 GiB) before GPU-0 (two); GPU-4 is too small.
  EXPECT_EQ(reserve_for_whole(v, {}, holding, {}, 3, 16 * kGiB),
            (std::vector<std::string>{"GPU-2", "GPU-3", "GPU-1"}));
  EXPECT_EQ(reserve_for_whole(v, {{"GPU-2", "w"}}, holding, {"GPU-3"}, 2, 16 * kGiB),
            (std::vector<std::string>{"GPU-1", "GPU-0"}));
  EXPECT_TRUE(reserve_for_whole(v, {}, holding, {}, 0, 0).empty());
}

// ---- The queue with shares ----

WaitingJob share_job(const std::string& id, ShareRequest r) {
  WaitingJob w;
  w.job_id = id;
  w.peer_id = "peer-" + id;
  w.share = r;
  return w;
}

WaitingJob whole_job(const std::string& id, int gpus = 1) {
  WaitingJob w;
  w.job_id = id;
  w.peer_id = "peer-" + id;
  w.gpus = gpus;
  return w;
}

QueueSnapshot snapshot(const GpuView& v, std::vector<ShareConfig> cfg) {
  QueueSnapshot s;
  s.now = kNow;
  s.max_concurrent = 100;
  s.max_per_peer = 100;
  s.gpus = v;
  s.gpu_shares = std::move(cfg);
  return s;
}

template <typename T>
std::vector<T> all_of_kind(const QueuePlan& plan) {
  std::vector<T> out;
  for (const auto& a : plan.actions) {
    if (const auto* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

TEST(QueueShares, SharesPackOntoOneDeviceWithTheirBudgetAndAWholeJobTakesAnother) {
  GpuView v = devices({24 * kGiB, 24 * kGiB});
  QueueSnapshot s = snapshot(v, shared(v, 4));
  s.queue = {share_job("s1", vram(8 * kGiB)), share_job("s2", fraction(250)), whole_job("w1")};
  QueuePlan plan = plan_queue(s);
  auto starts = all_of_kind<StartJob>(plan);
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].gpu_uuids, std::vector<std::string>{"GPU-0"});
  EXPECT_EQ(starts[0].share_vram_bytes, 8 * kGiB);
  EXPECT_EQ(starts[1].gpu_uuids, std::vector<std::string>{"GPU-0"});  // best fit: beside s1
  EXPECT_EQ(starts[1].share_vram_bytes, 6 * kGiB);
  EXPECT_EQ(starts[2].gpu_uuids, std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(starts[2].share_vram_bytes, 0u);
  EXPECT_EQ(starts[2].gpu_model, "FAKE GPU");
}

TEST(QueueShares, AWholeJobWaitsForADeviceWithSharesAndNoNewShareLandsThere) {
  GpuView v = devices({24 * kGiB});
  QueueSnapshot s = snapshot(v, shared(v, 4));
  ActiveJob a;
  a.job_id = "s0";
  a.peer_id = "peer-s0";
  a.running = true;
  a.gpu_uuids = {"GPU-0"};
  a.share_vram_bytes = 4 * kGiB;
  s.active = {a};
  s.queue = {share_job("s1", vram(4 * kGiB)), whole_job("w1"), share_job("s2", vram(4 * kGiB))};
  QueuePlan plan = plan_queue(s);
  auto starts = all_of_kind<StartJob>(plan);
  ASSERT_EQ(starts.size(), 1u);  // s1 was ahead of w1: FIFO
  EXPECT_EQ(starts[0].job_id, "s1");
  auto waits = all_of_kind<WaitJob>(plan);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0].job_id, "w1");
  EXPECT_NE(waits[0].reason.find("no new shares start on the GPU(s) it will get"), std::string::npos)
      << waits[0].reason;
  EXPECT_EQ(waits[1].job_id, "s2");
  EXPECT_NE(waits[1].reason.find("held back for a whole-GPU job"), std::string::npos) << waits[1].reason;
  // Once the shares end, the whole job starts, not the share behind it.
  QueueSnapshot later = snapshot(v, shared(v, 4));
  later.queue = {whole_job("w1"), share_job("s2", vram(4 * kGiB))};
  auto next = all_of_kind<StartJob>(plan_queue(later));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].job_id, "w1");
}

TEST(QueueShares, AShareTheProviderCanNeverHoldIsRefusedAndOneWithoutTheDevicesWaits) {
  GpuView v = devices({24 * kGiB});
  QueueSnapshot s = snapshot(v, {});
  s.queue = {share_job("s1", vram(kGiB))};
  auto refused = all_of_kind<RefuseJob>(plan_queue(s));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].code, "never_fits");
  EXPECT_NE(refused[0].reason.find("gpu.share"), std::string::npos) << refused[0].reason;
  s.gpus.reset();
  auto waits = all_of_kind<WaitJob>(plan_queue(s));
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].reason, "waiting for the GPU inventory to be read");
}

// ---- A seeded simulation in steps ----

struct SimJob {
  WaitingJob job;
  int duration = 1;  // steps it runs once started
};

struct Sim {
  GpuView gpus;
  std::vector<ShareConfig> config;
  std::vector<WaitingJob> queue;
  std::vector<ActiveJob> active;
  std::map<std::string, int> ends_at;   // job -> step it ends
  std::map<std::string, int> duration;  // job -> steps it runs
  std::map<std::string, int> started_at;
  std::set<std::string> refused;

  // One pass at `step`: jobs due end first, then the plan is applied.
  QueuePlan pass(int step) {
    std::erase_if(active, [&](const ActiveJob& a) { return ends_at.at(a.job_id) <= step; });
    QueueSnapshot s;
    s.now = kNow + std::chrono::seconds(step);
    s.max_concurrent = 1000;
    s.max_per_peer = 1000;
    s.gpus = gpus;
    s.gpu_shares = config;
    s.queue = queue;
    s.active = active;
    QueuePlan plan = plan_queue(s);
    std::vector<WaitingJob> left;
    for (const auto& id : plan.queue) {
      left.push_back(*std::find_if(queue.begin(), queue.end(), [&](const WaitingJob& w) { return w.job_id == id; }));
    }
    for (const auto& st : all_of_kind<StartJob>(plan)) {
      ActiveJob a;
      a.job_id = st.job_id;
      a.peer_id = "peer-" + st.job_id;
      a.running = true;
      a.gpu_uuids = st.gpu_uuids;
      a.share_vram_bytes = st.share_vram_bytes;
      active.push_back(a);
      started_at[st.job_id] = step;
      ends_at[st.job_id] = step + duration.at(st.job_id);
    }
    for (const auto& r : all_of_kind<RefuseJob>(plan)) refused.insert(r.job_id);
    queue = std::move(left);
    return plan;
  }
};

// Every device is leased whole to one job or shared within its capacity and
// count, never both, and shares sit only on devices gpu.share lends.
void expect_no_over_commit(const Sim& sim, uint64_t seed, int step) {
  std::map<std::string, int> whole;
  std::map<std::string, std::pair<int, uint64_t>> shares;
  for (const auto& a : sim.active) {
    if (a.share_vram_bytes > 0) {
      ASSERT_EQ(a.gpu_uuids.size(), 1u);
      ++shares[a.gpu_uuids[0]].first;
      shares[a.gpu_uuids[0]].second += a.share_vram_bytes;
    } else {
      for (const auto& u : a.gpu_uuids) ++whole[u];
    }
  }
  for (const auto& [uuid, n] : whole) {
    ASSERT_EQ(n, 1) << "seed " << seed << " step " << step << ": " << uuid << " leased whole twice";
    ASSERT_EQ(shares.count(uuid), 0u) << "seed " << seed << " step " << step << ": " << uuid << " shared and whole";
  }
  for (const auto& [device, use] : shares) {
    const std::string& uuid = device;  // a lambda cannot capture a structured binding (clang)
    auto c = std::find_if(sim.config.begin(), sim.config.end(), [&](const ShareConfig& x) { return x.uuid == uuid; });
    ASSERT_NE(c, sim.config.end()) << "seed " << seed << ": a share on " << uuid << ", which is not shared";
    auto dev = std::find_if(sim.gpus.devices.begin(), sim.gpus.devices.end(),
                            [&](const GpuSlot& d) { return d.uuid == uuid; });
    ASSERT_LE(use.first, c->max_jobs) << "seed " << seed << " step " << step << ": " << uuid;
    ASSERT_LE(use.second, share_capacity(*c, *dev)) << "seed " << seed << " step " << step << ": " << uuid;
  }
}

constexpr int kSeeds = 200;  // about 0.3 s in dev, 16 s under ASan
constexpr int kSteps = 60;
constexpr int kLongest = 6;  // a job runs 1 to kLongest steps

TEST(QueueSharesProperty, NoDeviceIsEverOverCommittedOrBothSharedAndLeasedWhole) {
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    const uint64_t mems[] = {8 * kGiB, 24 * kGiB, 80 * kGiB};
    Sim sim;
    sim.gpus = devices({});
    for (size_t i = 0, n = 1 + pick(4); i < n; ++i) {
      sim.gpus.devices.push_back({"GPU-" + std::to_string(i), "FAKE GPU", mems[pick(3)]});
      if (pick(4) != 0) {
        sim.config.push_back({"GPU-" + std::to_string(i), static_cast<int>(pick(5)), pick(3) * 2 * kGiB});
      }
    }
    int next_id = 0;
    for (int step = 0; step < kSteps; ++step) {
      for (size_t k = pick(3); k > 0; --k) {
        WaitingJob w;
        w.job_id = "j" + std::to_string(next_id++);
        w.peer_id = "peer-" + w.job_id;
        switch (pick(3)) {
          case 0:
            w.gpus = 1 + static_cast<int>(pick(2));
            w.vram_bytes = pick(3) == 0 ? 20 * kGiB : 0;
            break;
          case 1:
            w.share = vram((1 + pick(24)) * kGiB);
            break;
          default:
            w.share = fraction(static_cast<uint32_t>(50 + pick(950)));
        }
        sim.duration[w.job_id] = 1 + static_cast<int>(pick(kLongest));
        sim.queue.push_back(w);
      }
      QueuePlan plan = sim.pass(step);
      expect_no_over_commit(sim, seed, step);
      if (::testing::Test::HasFatalFailure()) return;
      for (const auto& st : all_of_kind<StartJob>(plan)) {
        ASSERT_TRUE(st.share_vram_bytes == 0 || st.gpu_uuids.size() == 1) << "seed " << seed;
      }
    }
  }
}

// Shares keep arriving (two a step, each running up to kLongest steps) on
// shared devices; whole-GPU jobs of one device arrive now and then. A whole
// job that is first among the whole jobs queued starts within kLongest + 1
// steps for each share that was queued ahead of it then, plus one: the
// devices it will get drain and no share behind it lands there. Without the
// hold-back, the shares would keep every device busy and it would wait for
// ever.
TEST(QueueSharesProperty, AStreamOfSharesNeverStarvesAWholeGpuJob) {
  int whole_started = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    Sim sim;
    sim.gpus = devices({});
    for (size_t i = 0, n = 1 + pick(3); i < n; ++i) {
      sim.gpus.devices.push_back({"GPU-" + std::to_string(i), "FAKE GPU", 24 * kGiB});
    }
    sim.config = shared(sim.gpus, 2 + static_cast<int>(pick(3)), 2 * kGiB);
    int next_id = 0;
    std::map<std::string, int> head_at;         // whole job -> step it became the first whole job queued
    std::map<std::string, size_t> shares_ahead;  // ... and the shares queued ahead of it then
    for (int step = 0; step < kSteps; ++step) {
      for (int k = 0; k < 2; ++k) {
        WaitingJob w = share_job("s" + std::to_string(next_id++), vram((2 + pick(8)) * kGiB));
        sim.duration[w.job_id] = 1 + static_cast<int>(pick(kLongest));
        sim.queue.push_back(w);
      }
      if (pick(6) == 0 && step < kSteps - 20) {
        WaitingJob w = whole_job("w" + std::to_string(next_id++));
        sim.duration[w.job_id] = 1 + static_cast<int>(pick(kLongest));
        sim.queue.push_back(w);
      }
      // The first whole job in the queue now, and what is ahead of it.
      size_t shares_before = 0;
      for (const auto& w : sim.queue) {
        if (w.gpus == 0) {
          ++shares_before;
          continue;
        }
        if (!head_at.count(w.job_id)) {
          head_at[w.job_id] = step;
          shares_ahead[w.job_id] = shares_before;
        }
        break;
      }
      sim.pass(step);
      expect_no_over_commit(sim, seed, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const auto& [id, at] : head_at) {
      ASSERT_EQ(sim.refused.count(id), 0u) << "seed " << seed << ": " << id << " refused";
      int bound = at + (kLongest + 1) * static_cast<int>(shares_ahead.at(id) + 1);
      if (bound >= kSteps) continue;  // the run ended before its bound
      ASSERT_TRUE(sim.started_at.count(id)) << "seed " << seed << ": " << id << " first at step " << at
                                            << " never started (bound " << bound << ")";
      ASSERT_LE(sim.started_at.at(id), bound) << "seed " << seed << ": " << id << " first at step " << at;
      ++whole_started;
    }
  }
  EXPECT_GT(whole_started, kSeeds);  // the property was exercised, not skipped
}

}  // namespace
}  // namespace yonder::jobs::provider
