// `yonder stats` rows and table (cli/job_stats.h): the CPU rate from two
// samples, memory against the limit, each GPU's use.
#include "cli/job_stats.h"

#include <gtest/gtest.h>

namespace yonder::cli {
namespace {

using nlohmann::json;

json sample(uint64_t at_ms, uint64_t cpu_ns) {
  return {{"sampled_at_ms", at_ms}, {"cpu_total_ns", cpu_ns}, {"memory_bytes", 256ULL << 20},
          {"memory_limit_bytes", 1ULL << 30}, {"pids", 3}, {"gpus", json::array()}};
}

TEST(StatsRow, TheCpuRateComesFromTwoSamplesAsDockersPercentOfOneCpu) {
  auto first = stats_row("train", nullptr, sample(1000, 5'000'000'000));
  EXPECT_LT(first.cpu_percent, 0);  // one sample: no rate yet
  auto r = stats_row("train", sample(1000, 5'000'000'000), sample(2000, 6'500'000'000));
  EXPECT_DOUBLE_EQ(r.cpu_percent, 150.0);  // 1.5 CPU-seconds in one second
  EXPECT_EQ(r.memory_bytes, 256ULL << 20);
  EXPECT_EQ(r.gpu, "-");
  auto table = stats_table({r});
  EXPECT_NE(table.find("JOB"), std::string::npos);
  EXPECT_NE(table.find("150.00%"), std::string::npos) << table;
  EXPECT_NE(table.find("256MiB / 1.00GiB"), std::string::npos) << table;
  EXPECT_NE(table.find("25.00%"), std::string::npos) << table;  // of its memory
  EXPECT_EQ(stats_json(r)["cpu_percent"], 150.0);
  EXPECT_TRUE(stats_json(first)["cpu_percent"].is_null());
}

TEST(StatsRow, EachGpuShowsItsUtilisationAndTheJobsVramAgainstItsLimit) {
  json now = sample(2000, 0);
  now["gpus"] = {{{"uuid", "GPU-a"}, {"utilization_percent", 93}, {"vram_used_bytes", 3ULL << 30},
                  {"vram_total_bytes", 80ULL << 30}, {"vram_limit_bytes", 0}},
                 {{"uuid", "GPU-b"}, {"utilization_percent", -1}, {"vram_used_bytes", nullptr},
                  {"vram_total_bytes", 80ULL << 30}, {"vram_limit_bytes", 20ULL << 30}}};
  auto r = stats_row("j", nullptr, now);
  EXPECT_EQ(r.gpu, "93%, ?");
  EXPECT_EQ(r.vram, "3.00GiB / 80.0GiB, ? / 20.0GiB");
}

TEST(StatsTable, AJobWithoutNumbersSaysWhy) {
  StatsRow r;
  r.label = "old\x1b[2Jjob";
  r.note = "job abc is exited: stats are for a running job";
  auto table = stats_table({r});
  EXPECT_NE(table.find("stats are for a running job"), std::string::npos);
  EXPECT_EQ(table.find('\x1b'), std::string::npos);  // a name never drives the terminal
}

TEST(BinarySize, ReadsAsDockersDoes) {
  EXPECT_EQ(binary_size(512), "512B");
  EXPECT_EQ(binary_size(1536), "1.50KiB");
  EXPECT_EQ(binary_size(300ULL << 20), "300MiB");
  EXPECT_EQ(binary_size(45ULL << 30), "45.0GiB");
}

}  // namespace
}  // namespace yonder::cli
