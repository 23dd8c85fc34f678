#include "cli/job_stats.h"

#include <cinttypes>
#include <cstdio>

#include "cli/shown.h"

namespace yonder::cli {
namespace {

uint64_t u64(const nlohmann::json& j, const char* key) {
  auto v = j.is_object() ? j.find(key) : j.end();
  return v != j.end() && v->is_number_unsigned() ? v->get<uint64_t>()
         : v != j.end() && v->is_number_integer() && v->get<int64_t>() > 0 ? static_cast<uint64_t>(v->get<int64_t>())
                                                                           : 0;
}

}  // namespace

std::string binary_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 "B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[u]);
  }
  return buf;
}

StatsRow stats_row(const std::string& label, const nlohmann::json& before, const nlohmann::json& now) {
  StatsRow r;
  r.label = label;
  r.memory_bytes = u64(now, "memory_bytes");
  r.memory_limit_bytes = u64(now, "memory_limit_bytes");
  r.pids = u64(now, "pids");
  uint64_t t0 = u64(before, "sampled_at_ms"), t1 = u64(now, "sampled_at_ms");
  uint64_t c0 = u64(before, "cpu_total_ns"), c1 = u64(now, "cpu_total_ns");
  if (t0 > 0 && t1 > t0 && c1 >= c0) {
    r.cpu_percent = static_cast<double>(c1 - c0) / (static_cast<double>(t1 - t0) * 1e6) * 100.0;
  }
  auto gpus = now.is_object() && now.contains("gpus") && now["gpus"].is_array() ? now["gpus"] : nlohmann::json::array();
  if (gpus.empty()) {
    r.gpu = r.vram = "-";
    return r;
  }
  for (const auto& g : gpus) {
    if (!r.gpu.empty()) {
      r.gpu += ", ";
      r.vram += ", ";
    }
    int util = g.is_object() && g.contains("utilization_percent") && g["utilization_percent"].is_number_integer()
                   ? g["utilization_percent"].get<int>()
                   : -1;
    r.gpu += util < 0 ? "?" : std::to_string(util) + "%";
    bool known = g.is_object() && g.contains("vram_used_bytes") && g["vram_used_bytes"].is_number();
    uint64_t total = u64(g, "vram_limit_bytes") > 0 ? u64(g, "vram_limit_bytes") : u64(g, "vram_total_bytes");
    r.vram += (known ? binary_size(u64(g, "vram_used_bytes")) : std::string("?")) + " / " +
              (total > 0 ? binary_size(total) : std::string("?"));
  }
  return r;
}

std::string stats_table(const std::vector<StatsRow>& rows) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-16s  %7s  %-21s  %6s  %5s  %-8s  %s\n", "JOB", "CPU %", "MEM USAGE / LIMIT",
                "MEM %", "PIDS", "GPU %", "VRAM USAGE / LIMIT");
  out += line;
  for (const auto& r : rows) {
    std::string label = shown(r.label).substr(0, 16);
    if (!r.note.empty()) {
      std::snprintf(line, sizeof line, "%-16s  %s\n", label.c_str(), shown(r.note).c_str());
      out += line;
      continue;
    }
    char cpu[16] = "--", mem_pct[16] = "--";
    if (r.cpu_percent >= 0) std::snprintf(cpu, sizeof cpu, "%.2f%%", r.cpu_percent);
    if (r.memory_limit_bytes > 0) {
      std::snprintf(mem_pct, sizeof mem_pct, "%.2f%%",
                    100.0 * static_cast<double>(r.memory_bytes) / static_cast<double>(r.memory_limit_bytes));
    }
    std::string mem = binary_size(r.memory_bytes) + " / " +
                      (r.memory_limit_bytes > 0 ? binary_size(r.memory_limit_bytes) : std::string("?"));
    std::snprintf(line, sizeof line, "%-16s  %7s  %-21s  %6s  %5" PRIu64 "  %-8s  %s\n", label.c_str(), cpu,
                  mem.c_str(), mem_pct, r.pids, r.gpu.c_str(), r.vram.c_str());
    out += line;
  }
  return out;
}

nlohmann::json stats_json(const StatsRow& r) {
  nlohmann::json j = {{"job", r.label}};
  if (!r.note.empty()) {
    j["note"] = r.note;
    return j;
  }
  j["cpu_percent"] = r.cpu_percent < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.cpu_percent);
  j["memory_bytes"] = r.memory_bytes;
  j["memory_limit_bytes"] = r.memory_limit_bytes;
  j["pids"] = r.pids;
  j["gpu"] = r.gpu;
  j["vram"] = r.vram;
  return j;
}

}  // namespace yonder::cli
