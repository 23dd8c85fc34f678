// Mesh benchmarks, one core, no I/O:
//  1. placement: placements per second and latency percentiles against a
//     snapshot of P providers for J queued jobs (goal at 10,000 providers and
//     100,000 jobs: >= 100,000 placements/s, p99 <= 1 ms), with the
//     PlacementIndex built once per snapshot; and the cost of that build;
//  2. gossip: rounds (and simulated seconds at a 5 s interval) until every
//     member of an N-node group holds a new membership version, pushed by
//     rumour mongering over an in-memory network with a manual clock, with
//     and without message loss, over several seeds.
//
//  3. arrays: the consumer's bookkeeping per task of an array
//     (mesh::ArrayRun: next, started, finished) for T tasks over 50
//     providers with a limit of 64, against placing each task through the
//     PlacementIndex: the scheduler's own overhead per task.
//
//   mesh_bench                 tiny sizes (ctest, label bench)
//   mesh_bench --full          10,000 providers, 100,000 jobs, 200-node group
//   mesh_bench --providers=N --jobs=N --group=N --seeds=N
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "mesh/core/gossip.h"
#include "mesh/core/placement.h"
#include "mesh/core/work_units.h"

using namespace yonder;
using namespace yonder::mesh;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr UnixMs kNow = 1'800'000'000'000;

PeerKey key(uint32_t n) {
  PeerKey k{};
  for (size_t i = 0; i < 4; ++i) k[31 - i] = static_cast<uint8_t>(n >> (8 * i));
  k[0] = 0x42;
  return k;
}

GpuOffer gpu(const char* model, uint64_t gib, uint32_t cap, bool leased) {
  GpuOffer g;
  g.model = model;
  g.memory_bytes = gib << 30;
  g.cuda_major = cap / 100;
  g.cuda_minor = cap % 100;
  g.driver = "550.54.14";
  g.leased = leased;
  return g;
}

Snapshot make_snapshot(size_t providers, std::mt19937_64& rng) {
  struct Model {
    const char* name;
    uint64_t gib;
    uint32_t cap;
  };
  const Model models[] = {{"NVIDIA GeForce RTX 4090", 24, 809},
                          {"NVIDIA GeForce RTX 3090", 24, 806},
                          {"NVIDIA A100-SXM4-80GB", 80, 800},
                          {"NVIDIA H100 80GB HBM3", 80, 900},
                          {"Tesla T4", 16, 705}};
  Snapshot s;
  s.now_ms = kNow;
  s.providers.reserve(providers);
  for (size_t p = 0; p < providers; ++p) {
    ProviderView v;
    v.ad.provider = key(static_cast<uint32_t>(p));
    const Model& m = models[rng() % 5];
    size_t n = 1 + rng() % 8;
    for (size_t i = 0; i < n; ++i) v.ad.gpus.push_back(gpu(m.name, m.gib, m.cap, rng() % 3 == 0));
    v.ad.queue_depth = static_cast<uint32_t>(rng() % 6);
    v.ad.labels["site"] = "site" + std::to_string(rng() % 20);
    v.ad.labels["gpu"] = std::to_string(m.cap);
    v.ad.issued_at_ms = kNow - static_cast<UnixMs>(rng() % 30'000);
    v.ad.expires_at_ms = v.ad.issued_at_ms + 60'000;
    v.path_quality = (rng() % 4) / 3.0;
    v.rtt_ms = static_cast<double>(rng() % 300);
    v.reputation = (rng() % 101) / 100.0;
    v.credit = static_cast<double>(static_cast<int64_t>(rng() % 40'000) - 20'000);
    v.groups.push_back("group" + std::to_string(rng() % 5));
    s.providers.push_back(std::move(v));
  }
  return s;
}

// A mix: most jobs want one GPU; some pin a site or a group; a few want four
// big, recent GPUs (rare: the index has to find them without a full scan).
std::vector<PlacementRequest> make_jobs(size_t jobs, std::mt19937_64& rng) {
  std::vector<PlacementRequest> out(jobs);
  for (auto& j : out) {
    switch (rng() % 10) {
      case 0:
      case 1: j.labels["site"] = "site" + std::to_string(rng() % 20); break;
      case 2: j.group = "group" + std::to_string(rng() % 5); break;
      case 3:
        j.gpus = 4;
        j.vram_bytes = 80ull << 30;
        j.min_capability = 900;
        break;
      case 4:
        j.gpus = 2;
        j.vram_bytes = 24ull << 30;
        j.min_capability = 806;
        break;
      default: break;
    }
  }
  return out;
}

double pct(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

void bench_placement(size_t providers, size_t jobs) {
  std::mt19937_64 rng(1);
  Snapshot snap = make_snapshot(providers, rng);
  auto reqs = make_jobs(jobs, rng);
  Weights w;
  auto t0 = SteadyClock::now();
  PlacementIndex index(snap, w);
  double build_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
  std::vector<double> lat_us;
  lat_us.reserve(jobs);
  size_t placed = 0;
  auto start = SteadyClock::now();
  for (const auto& j : reqs) {
    auto a = SteadyClock::now();
    Plan p = index.place(j);
    auto b = SteadyClock::now();
    placed += !p.ranked.empty();
    lat_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  std::printf("placement: %zu providers, %zu jobs, index build %.1f ms\n", providers, jobs, build_ms);
  std::printf("  %.0f placements/s (goal >= 100000), %zu with a plan\n", static_cast<double>(jobs) / secs, placed);
  double p50 = pct(lat_us, 0.50), p99 = pct(lat_us, 0.99), p999 = pct(lat_us, 0.999);
  double max = *std::max_element(lat_us.begin(), lat_us.end());
  std::printf("  latency p50 %.2f us, p99 %.2f us (goal <= 1000), p99.9 %.2f us, max %.2f us\n", p50, p99, p999, max);
  // Worst case: a job no provider can run (capability 10.0) walks every
  // entry, with the cheap per-provider rejections only.
  PlacementRequest impossible;
  impossible.min_capability = 1000;
  std::vector<double> worst_us;
  for (int i = 0; i < 1000; ++i) {
    auto a = SteadyClock::now();
    Plan p = index.place(impossible);
    auto b = SteadyClock::now();
    if (!p.ranked.empty()) std::abort();
    worst_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::printf("  worst case (no provider feasible, full walk): p50 %.2f us, p99 %.2f us\n", pct(worst_us, 0.5),
              pct(worst_us, 0.99));
  // Without the index: the free function builds it for every query.
  size_t naive = std::min<size_t>(jobs, 50);
  auto n0 = SteadyClock::now();
  for (size_t i = 0; i < naive; ++i) (void)place(snap, reqs[i], w);
  double naive_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - n0).count() / static_cast<double>(naive);
  std::printf("  for comparison, place() rebuilding the index per query: %.2f ms per placement\n", naive_ms);
}

struct GossipOutcome {
  int rounds = -1;
  size_t messages = 0;
};

GossipOutcome gossip_once(size_t n, uint64_t seed, double loss) {
  std::mt19937_64 rng(seed);
  auto seed_of = [](uint32_t i) {
    std::array<uint8_t, 32> s{};
    std::memcpy(s.data(), &i, sizeof i);
    s[31] = 0x6b;
    return Identity::from_seed(ByteView(s.data(), s.size())).value();
  };
  Identity owner = seed_of(0);
  Membership v1;
  v1.group_id = "00112233445566778899aabbccddeeff";
  v1.name = "bench";
  v1.version = 1;
  v1.owner = owner.public_key();
  for (uint32_t i = 1; i < n; ++i) {
    Member m;
    m.id = seed_of(i).public_key();
    v1.members.push_back(m);
  }
  sign_membership(v1, owner);
  auto random = [&rng](uint64_t k) { return rng() % k; };
  std::map<PeerKey, GossipMember> nodes;
  nodes.emplace(owner.public_key(), GossipMember(owner.public_key(), owner.public_key(), GossipParams{}, random));
  for (const auto& m : v1.members) {
    auto& node = nodes.emplace(m.id, GossipMember(m.id, owner.public_key(), GossipParams{}, random)).first->second;
    node.on_membership(v1);  // everyone starts on version 1, quiet
    while (!node.tick().empty()) {
    }
  }
  nodes.at(owner.public_key()).on_membership(v1);
  while (!nodes.at(owner.public_key()).tick().empty()) {
  }
  // The change: the owner removes the last member.
  Membership v2 = v1;
  v2.version = 2;
  PeerKey removed = v2.members.back().id;
  v2.members.pop_back();
  sign_membership(v2, owner);
  nodes.at(owner.public_key()).on_membership(v2);
  GossipOutcome out;
  std::uniform_real_distribution<double> u(0, 1);
  for (int round = 0; round < 200; ++round) {
    bool all = true;
    for (auto& [k, node] : nodes) {
      if (k != removed && node.held()->version != 2) all = false;
    }
    if (all) {
      out.rounds = round;
      return out;
    }
    std::vector<GossipSend> wire;
    for (auto& [k, node] : nodes) {
      auto sends = node.tick();
      wire.insert(wire.end(), sends.begin(), sends.end());
    }
    out.messages += wire.size();
    for (const auto& s : wire) {
      if (u(rng) < loss) continue;
      nodes.at(s.to).on_membership(s.membership);
    }
  }
  return out;
}

void bench_gossip(size_t n, int seeds) {
  for (double loss : {0.0, 0.2}) {
    int worst = 0, failed = 0;
    double sum = 0;
    size_t msgs = 0;
    auto t0 = SteadyClock::now();
    for (int s = 0; s < seeds; ++s) {
      auto o = gossip_once(n, static_cast<uint64_t>(s + 1), loss);
      if (o.rounds < 0) {
        ++failed;
        continue;
      }
      worst = std::max(worst, o.rounds);
      sum += o.rounds;
      msgs += o.messages;
    }
    double wall = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count() / seeds;
    int ok = seeds - failed;
    std::printf(
        "gossip: %zu-node group, fanout 3, %.0f%% loss, %d seeds: rounds to converge mean %.1f, max %d "
        "(%.0f s / %d s simulated at a 5 s interval), %zu messages per change, %d did not converge, "
        "%.1f ms wall per run\n",
        n, loss * 100, seeds, ok ? sum / ok : 0.0, worst, ok ? 5 * sum / ok : 0.0, 5 * worst,
        ok ? msgs / static_cast<size_t>(ok) : 0, failed, wall);
  }
}

void bench_array(uint32_t tasks) {
  ArraySpec spec;
  spec.tasks = tasks;
  spec.limit = 64;
  spec.retries = 2;
  ArrayRun run(spec);
  std::vector<PeerKey> providers(50);
  for (size_t i = 0; i < providers.size(); ++i) providers[i][31] = static_cast<uint8_t>(i + 1);
  std::mt19937_64 rng(1);
  std::vector<std::pair<uint64_t, size_t>> running;  // attempt, provider
  UnixMs now = 1'800'000'000'000;
  uint64_t results = 0, steps = 0;
  auto t0 = SteadyClock::now();
  while (!run.complete()) {
    for (const auto& l : run.next(now, 64 - running.size())) {
      size_t p = rng() % providers.size();
      (void)run.started(l.attempt, providers[p], now);
      running.emplace_back(l.attempt, p);
    }
    if (running.empty()) break;  // nothing runs and nothing could start
    // One attempt ends (2 % fail): the oldest.
    auto [attempt, p] = running.front();
    running.erase(running.begin());
    now += 10;
    bool fails = rng() % 50 == 0;
    auto v = run.finished(attempt, fails ? AttemptOutcome::kFailed : AttemptOutcome::kSucceeded, now, "r");
    results += v == ArrayRun::Verdict::kResult;
    ++steps;
  }
  double s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  std::printf("array bookkeeping: %u tasks, %llu attempts in %.3f s: %.2f us per task (%llu results, %u failed for good)\n",
              tasks, static_cast<unsigned long long>(steps), s, s * 1e6 / tasks, static_cast<unsigned long long>(results),
              run.counts().failed);
  auto save0 = SteadyClock::now();
  std::string saved = run.to_json().dump();
  double save_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - save0).count();
  std::printf("array state: %zu bytes as JSON, written in %.1f ms (once per change, coalesced)\n", saved.size(), save_ms);
}

size_t arg(int argc, char** argv, const char* name, size_t def) {
  size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return std::stoul(argv[i] + len + 1);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  bool full = false;
  for (int i = 1; i < argc; ++i) full = full || std::strcmp(argv[i], "--full") == 0;
  size_t providers = arg(argc, argv, "--providers", full ? 10'000 : 500);
  size_t jobs = arg(argc, argv, "--jobs", full ? 100'000 : 2'000);
  size_t group = arg(argc, argv, "--group", full ? 200 : 30);
  int seeds = static_cast<int>(arg(argc, argv, "--seeds", full ? 20 : 2));
  bench_placement(providers, jobs);
  bench_gossip(group, seeds);
  bench_array(static_cast<uint32_t>(arg(argc, argv, "--tasks", full ? 100'000 : 2'000)));
  return 0;
}
