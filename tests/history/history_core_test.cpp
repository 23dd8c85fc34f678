// The history's decisions without I/O: series names and titles, thinning
// points for a chart, counters to rates, readings to samples.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "history/history_core.h"

namespace yonder::history {
namespace {

TEST(HistoryCore, SeriesNamesSayTheirUnitAndNamePeersByName) {
  auto gpu = series_info("gpu.1.temperature_c");
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->unit, "°C");
  EXPECT_EQ(gpu->title, "GPU 1 temperature");
  std::string id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  auto named = series_info("peer." + id + ".received_bytes_per_s", {{id, "studio"}});
  ASSERT_TRUE(named);
  EXPECT_EQ(named->unit, "bytes/s");
  EXPECT_NE(named->title.find("studio"), std::string::npos) << named->title;
  auto unnamed = series_info("peer." + id + ".sent_bytes_per_s");
  ASSERT_TRUE(unnamed);
  EXPECT_NE(unnamed->title.find(id.substr(0, 12)), std::string::npos) << unnamed->title;
  EXPECT_TRUE(series_info("job.abc.cpu_percent"));
  for (const char* bad : {"", "gpu", "gpu.0", "gpu..temperature_c", "gpu.0.", "gpu.0.volts", "disk.0.temperature_c"}) {
    EXPECT_FALSE(series_info(bad)) << bad;
  }
}

TEST(HistoryCore, DownsampleAveragesEqualTimeBucketsAndKeepsShortSeries) {
  std::vector<Point> few = {{1, 10}, {2, 20}};
  EXPECT_EQ(downsample(few, 5), few);
  EXPECT_TRUE(downsample(few, 0).empty());
  std::vector<Point> many;
  for (int i = 0; i < 100; ++i) many.push_back({double(i), double(i % 2 == 0 ? 0 : 10)});
  auto thin = downsample(many, 10);
  ASSERT_EQ(thin.size(), 10u);
  for (size_t i = 0; i < thin.size(); ++i) {
    EXPECT_NEAR(thin[i].value, 5.0, 1e-9) << i;  // each bucket holds as many zeros as tens
    if (i > 0) {
      EXPECT_LT(thin[i - 1].at_s, thin[i].at_s);
    }
  }
  EXPECT_GE(thin.front().at_s, many.front().at_s);
  EXPECT_LE(thin.back().at_s, many.back().at_s);
  // A gap leaves empty buckets out instead of inventing points.
  std::vector<Point> gap = {{0, 1}, {1, 1}, {2, 1}, {100, 3}, {101, 3}};
  auto g = downsample(gap, 4);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_DOUBLE_EQ(g[0].value, 1);
  EXPECT_DOUBLE_EQ(g[1].value, 3);
}

TEST(HistoryCore, CountersBecomeRatesAndACounterThatWentDownCountsFromZero) {
  RateMeter m;
  EXPECT_TRUE(m.update(100, {{"a", 1000}}).empty());  // the first reading has nothing to compare
  auto r = m.update(110, {{"a", 6000}});
  ASSERT_TRUE(r.contains("a"));
  EXPECT_DOUBLE_EQ(r["a"], 500);
  r = m.update(120, {{"a", 2000}});  // a new session: 2000 since the last sample
  EXPECT_DOUBLE_EQ(r["a"], 200);
  EXPECT_TRUE(m.update(120, {{"a", 3000}}).empty());  // no time passed
  m.update(130, {});                                  // gone: forgotten
  EXPECT_TRUE(m.update(140, {{"a", 9000}}).empty());
}

TEST(HistoryCore, ReadingsBecomeSamplesAndUnknownsAreLeftOut) {
  gpu::InventoryReport report;
  gpu::GpuDevice d;
  d.index = 0;
  d.memory_total_bytes = 80;
  d.memory_used_bytes = 20;
  d.utilization_percent = 55;
  d.temperature_c = 61;
  d.power_milliwatts = 250'500;
  gpu::GpuDevice unknown;
  unknown.index = 1;
  report.devices = {d, unknown};
  auto s = gpu_samples(report);
  auto value = [&](const std::string& name) -> std::optional<double> {
    for (const auto& x : s) {
      if (x.series == name) return x.value;
    }
    return std::nullopt;
  };
  EXPECT_EQ(value("gpu.0.utilization_percent"), 55);
  EXPECT_EQ(value("gpu.0.memory_used_bytes"), 20);
  EXPECT_EQ(value("gpu.0.memory_total_bytes"), 80);
  EXPECT_EQ(value("gpu.0.temperature_c"), 61);
  EXPECT_EQ(value("gpu.0.power_watts"), 250.5);
  EXPECT_FALSE(value("gpu.1.utilization_percent"));
  EXPECT_FALSE(value("gpu.1.temperature_c"));
  EXPECT_FALSE(value("gpu.1.power_watts"));
  EXPECT_EQ(value("gpu.1.memory_used_bytes"), 0);

  // Two sessions with one peer add up; each direction is a rate.
  RateMeter rates;
  std::vector<PeerTraffic> t0 = {{"P", 100, 10}, {"P", 100, 10}};
  EXPECT_TRUE(traffic_samples(0, t0, rates).empty());
  std::vector<PeerTraffic> t1 = {{"P", 1100, 510}, {"P", 100, 10}};
  auto rs = traffic_samples(2, t1, rates);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0], (Sample{"peer.P.received_bytes_per_s", 500}));
  EXPECT_EQ(rs[1], (Sample{"peer.P.sent_bytes_per_s", 250}));
}

TEST(HistoryCore, AJobsStatsBecomeItsUseWithCpuAsPercentOfACore) {
  nlohmann::json stats = {{"job_id", "j1"},
                          {"sampled_at_ms", 10'000},
                          {"cpu_total_ns", 1'000'000'000},
                          {"memory_bytes", 4096},
                          {"gpus",
                           {{{"utilization_percent", 30}, {"vram_used_bytes", 100}},
                            {{"utilization_percent", 50}, {"vram_used_bytes", 300}}}}};
  auto u = job_usage_from_stats(stats);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->vram_used_bytes, 400u);
  EXPECT_EQ(u->gpu_utilization_percent, 40);
  stats["gpus"][1]["vram_used_bytes"] = nullptr;  // the driver could not say for one
  EXPECT_FALSE(job_usage_from_stats(stats)->vram_used_bytes);
  EXPECT_FALSE(job_usage_from_stats(nlohmann::json::object()));
  EXPECT_FALSE(job_usage_from_stats({{"job_id", "a.b"}, {"sampled_at_ms", 1}, {"cpu_total_ns", 1}, {"memory_bytes", 1}}));

  RateMeter cpu;
  std::vector<JobUsage> first = {*u};
  auto s0 = job_samples(first, cpu);
  EXPECT_EQ(s0.size(), 3u);  // memory, VRAM and GPU utilisation; no CPU rate yet
  JobUsage later = *u;
  later.at_s = 20;
  later.cpu_total_ns += 15'000'000'000;  // 1.5 cores over 10 s
  std::vector<JobUsage> second = {later};
  bool saw_cpu = false;
  for (const auto& s : job_samples(second, cpu)) {
    if (s.series == "job.j1.cpu_percent") {
      saw_cpu = true;
      EXPECT_DOUBLE_EQ(s.value, 150);
    }
  }
  EXPECT_TRUE(saw_cpu);
}

}  // namespace
}  // namespace yonder::history
