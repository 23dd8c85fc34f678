#include "history/history_core.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace yonder::history {

namespace {

// "gpu.0.utilization_percent" -> {"gpu", "0", "utilization_percent"}; the
// middle part (a node id or job id) has no dots.
struct Parts {
  std::string_view kind, subject, quantity;
};
std::optional<Parts> split(std::string_view name) {
  size_t a = name.find('.');
  if (a == std::string_view::npos) return std::nullopt;
  size_t b = name.find('.', a + 1);
  if (b == std::string_view::npos || b == a + 1 || b + 1 >= name.size()) return std::nullopt;
  return Parts{name.substr(0, a), name.substr(a + 1, b - a - 1), name.substr(b + 1)};
}

struct Quantity {
  std::string_view kind, quantity, unit, what;
};
constexpr Quantity kQuantities[] = {
    {"gpu", "utilization_percent", "%", "utilisation"},
    {"gpu", "memory_used_bytes", "bytes", "VRAM used"},
    {"gpu", "memory_total_bytes", "bytes", "VRAM"},
    {"gpu", "temperature_c", "°C", "temperature"},
    {"gpu", "power_watts", "W", "power"},
    {"peer", "received_bytes_per_s", "bytes/s", "received from"},
    {"peer", "sent_bytes_per_s", "bytes/s", "sent to"},
    {"job", "cpu_percent", "%", "CPU"},
    {"job", "memory_bytes", "bytes", "memory"},
    {"job", "vram_used_bytes", "bytes", "VRAM used"},
    {"job", "gpu_utilization_percent", "%", "GPU utilisation"},
};

std::string name_of(std::string_view kind, std::string_view subject, std::string_view quantity) {
  std::string out;
  out.reserve(kind.size() + subject.size() + quantity.size() + 2);
  out.append(kind).append(".").append(subject).append(".").append(quantity);
  return out;
}

}  // namespace

std::optional<SeriesInfo> series_info(std::string_view name, const std::map<std::string, std::string>& names) {
  auto parts = split(name);
  if (!parts) return std::nullopt;
  for (const auto& q : kQuantities) {
    if (q.kind != parts->kind || q.quantity != parts->quantity) continue;
    std::string subject(parts->subject);
    if (q.kind == "gpu") return SeriesInfo{std::string(q.unit), "GPU " + subject + " " + std::string(q.what)};
    if (q.kind == "peer") {
      auto it = names.find(subject);
      std::string who = it != names.end() && !it->second.empty() ? it->second : subject.substr(0, 12);
      return SeriesInfo{std::string(q.unit), "bytes/s " + std::string(q.what) + " " + who};
    }
    return SeriesInfo{std::string(q.unit), "job " + subject.substr(0, 12) + " " + std::string(q.what)};
  }
  return std::nullopt;
}

std::vector<Point> downsample(std::span<const Point> points, size_t max_points) {
  if (max_points == 0) return {};
  if (points.size() <= max_points) return {points.begin(), points.end()};
  double first = points.front().at_s, last = points.back().at_s;
  double width = (last - first) / static_cast<double>(max_points);
  std::vector<Point> out;
  out.reserve(max_points);
  size_t i = 0;
  for (size_t bucket = 0; bucket < max_points && i < points.size(); ++bucket) {
    // The last bucket takes what is left (the end of the span is in it).
    double end = bucket + 1 == max_points ? INFINITY : first + width * static_cast<double>(bucket + 1);
    double sum_t = 0, sum_v = 0;
    size_t n = 0;
    for (; i < points.size() && points[i].at_s < end; ++i, ++n) {
      sum_t += points[i].at_s;
      sum_v += points[i].value;
    }
    if (n > 0) out.push_back({sum_t / static_cast<double>(n), sum_v / static_cast<double>(n)});
  }
  return out;
}

std::vector<Sample> gpu_samples(const gpu::InventoryReport& report) {
  std::vector<Sample> out;
  for (const auto& d : report.devices) {
    std::string i = std::to_string(d.index);
    if (d.utilization_percent >= 0) out.push_back({name_of("gpu", i, "utilization_percent"), double(d.utilization_percent)});
    out.push_back({name_of("gpu", i, "memory_used_bytes"), static_cast<double>(d.memory_used_bytes)});
    out.push_back({name_of("gpu", i, "memory_total_bytes"), static_cast<double>(d.memory_total_bytes)});
    if (d.temperature_c >= 0) out.push_back({name_of("gpu", i, "temperature_c"), double(d.temperature_c)});
    if (d.power_milliwatts >= 0) out.push_back({name_of("gpu", i, "power_watts"), d.power_milliwatts / 1000.0});
  }
  return out;
}

namespace {
// A JSON integer that is not negative, however it was written.
std::optional<uint64_t> count_in(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
  return std::nullopt;
}
}  // namespace

std::optional<JobUsage> job_usage_from_stats(const nlohmann::json& stats) {
  if (!stats.is_object()) return std::nullopt;
  auto text = stats.find("job_id");
  auto at = count_in(stats, "sampled_at_ms");
  auto cpu = count_in(stats, "cpu_total_ns");
  auto memory = count_in(stats, "memory_bytes");
  if (text == stats.end() || !text->is_string() || !at || !cpu || !memory) return std::nullopt;
  JobUsage u;
  u.job_id = text->get<std::string>();
  if (u.job_id.empty() || u.job_id.find('.') != std::string::npos) return std::nullopt;
  u.at_s = static_cast<double>(*at) / 1000.0;
  u.cpu_total_ns = *cpu;
  u.memory_bytes = *memory;
  // Over the job's GPUs: VRAM adds up (unknown if any is), utilisation averages those that report one.
  auto gpus = stats.find("gpus");
  if (gpus != stats.end() && gpus->is_array() && !gpus->empty()) {
    uint64_t vram = 0;
    bool vram_known = true;
    int util_sum = 0, util_n = 0;
    for (const auto& g : *gpus) {
      if (!g.is_object()) continue;
      if (auto v = count_in(g, "vram_used_bytes")) {
        vram += *v;
      } else {
        vram_known = false;
      }
      auto util = g.find("utilization_percent");
      if (util != g.end() && util->is_number_integer() && util->get<int64_t>() >= 0 && util->get<int64_t>() <= 100) {
        util_sum += static_cast<int>(util->get<int64_t>());
        ++util_n;
      }
    }
    if (vram_known) u.vram_used_bytes = vram;
    if (util_n > 0) u.gpu_utilization_percent = util_sum / util_n;
  }
  return u;
}

std::map<std::string, double> RateMeter::update(double now_s, const std::map<std::string, uint64_t>& totals) {
  std::map<std::string, double> rates;
  std::map<std::string, Last> next;
  for (const auto& [key, total] : totals) {
    next[key] = {now_s, total};
    auto it = last_.find(key);
    if (it == last_.end() || now_s <= it->second.at_s) continue;
    uint64_t delta = total >= it->second.total ? total - it->second.total : total;
    rates[key] = static_cast<double>(delta) / (now_s - it->second.at_s);
  }
  last_ = std::move(next);
  return rates;
}

std::vector<Sample> traffic_samples(double now_s, std::span<const PeerTraffic> sessions, RateMeter& rates) {
  // Per peer, over its sessions; each direction is its own counter.
  std::map<std::string, uint64_t> totals;
  for (const auto& s : sessions) {
    totals[name_of("peer", s.node_id, "received_bytes_per_s")] += s.bytes_in;
    totals[name_of("peer", s.node_id, "sent_bytes_per_s")] += s.bytes_out;
  }
  std::vector<Sample> out;
  for (const auto& [series, rate] : rates.update(now_s, totals)) out.push_back({series, rate});
  return out;
}

std::vector<Sample> job_samples(std::span<const JobUsage> jobs, RateMeter& cpu) {
  std::vector<Sample> out;
  std::map<std::string, uint64_t> cpu_ns;
  double now_s = 0;
  for (const auto& j : jobs) {
    cpu_ns[name_of("job", j.job_id, "cpu_percent")] = j.cpu_total_ns;
    now_s = std::max(now_s, j.at_s);
    out.push_back({name_of("job", j.job_id, "memory_bytes"), static_cast<double>(j.memory_bytes)});
    if (j.vram_used_bytes) out.push_back({name_of("job", j.job_id, "vram_used_bytes"), double(*j.vram_used_bytes)});
    if (j.gpu_utilization_percent) {
      out.push_back({name_of("job", j.job_id, "gpu_utilization_percent"), double(*j.gpu_utilization_percent)});
    }
  }
  // CPU time in ns per second of wall time: 1e9 ns/s is one core, 100 %.
  for (const auto& [series, ns_per_s] : cpu.update(now_s, cpu_ns)) out.push_back({series, ns_per_s / 1e7});
  return out;
}

}  // namespace yonder::history
