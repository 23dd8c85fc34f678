// `yonder stats`: a running job's use of its provider, as `docker stats`
// shows a container's. Pure: the rows are made from the provider's samples
// (GET /v1/jobs/stats), two of which give the CPU rate.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace yonder::cli {

// One job's line. `before` is its previous sample (null: none yet, the CPU
// rate is then unknown); `now` its latest. `label` names the job (its name
// or short id).
struct StatsRow {
  std::string label;
  double cpu_percent = -1;   // of one CPU, as docker counts (200 = two CPUs busy); -1 unknown
  uint64_t memory_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // 0 unknown
  uint64_t pids = 0;
  std::string gpu;           // "93%" per GPU, comma-separated; "-" without a GPU
  std::string vram;          // "3.1GiB / 80GiB" per GPU; "-" without a GPU or when the driver cannot say
  std::string note;          // instead of the numbers: why there are none (not running, unreachable)
};
StatsRow stats_row(const std::string& label, const nlohmann::json& before, const nlohmann::json& now);

// The table: JOB, CPU %, MEM USAGE / LIMIT, MEM %, PIDS, GPU %, VRAM USAGE / TOTAL.
std::string stats_table(const std::vector<StatsRow>& rows);
// A row as one JSON object (`--format json`).
nlohmann::json stats_json(const StatsRow& row);

// Bytes as docker prints them: "512KiB", "1.5MiB", "3.2GiB".
std::string binary_size(uint64_t bytes);

}  // namespace yonder::cli
