#include "crypto/scope.h"

#include <algorithm>

#include <charconv>
#include <nlohmann/json.hpp>

namespace yonder {
namespace {

struct CapName {
  Capability cap;
  std::string_view name;
};
constexpr CapName kCapNames[] = {{Capability::kRun, "run"},
                                 {Capability::kExec, "exec"},
                                 {Capability::kForward, "forward"},
                                 {Capability::kFiles, "files"},
                                 {Capability::kMesh, "mesh"},
                                 {Capability::kCuda, "cuda"}};

Result<uint64_t> parse_number_with_suffix(std::string_view text, std::string_view what,
                                          std::initializer_list<std::pair<char, uint64_t>> units, uint64_t plain) {
  auto bad = [&] {
    return make_error(ErrorCode::kInvalidArgument, "\"" + std::string(text.substr(0, 32)) + "\" is not a " +
                                                       std::string(what));
  };
  if (text.empty() || text.size() > 24) return bad();
  uint64_t mult = plain;
  char last = text.back();
  bool suffixed = false;
  for (auto [c, m] : units) {
    if (last == c || last == c + ('a' - 'A')) {
      mult = m;
      suffixed = true;
    }
  }
  std::string_view digits = suffixed ? text.substr(0, text.size() - 1) : text;
  if (digits.empty()) return bad();
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return bad();
  if (n != 0 && mult > UINT64_MAX / n) return bad();
  return n * mult;
}

}  // namespace

std::string Scope::capabilities_text() const {
  std::string out;
  for (const auto& c : kCapNames) {
    if (allows(c.cap)) out += (out.empty() ? "" : ",") + std::string(c.name);
  }
  return out.empty() ? "none" : out;
}

std::string Scope::summary() const {
  std::string out = capabilities_text() + "; ";
  out += gpus == 0 ? "no GPU" : std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  if (vram_bytes) out += ", " + format_size(vram_bytes) + " VRAM";
  out += ", " + (max_time_s ? format_duration(max_time_s) : std::string("no time limit"));
  out += ", " + std::to_string(max_jobs) + (max_jobs == 1 ? " job" : " jobs");
  if (cpus_milli) out += ", " + std::to_string(cpus_milli / 1000.0).substr(0, 4) + " CPUs";
  if (memory_bytes) out += ", " + format_size(memory_bytes) + " memory";
  if (disk_bytes) out += ", " + format_size(disk_bytes) + " disk";
  out += egress ? ", egress allowed" : ", no egress";
  return out;
}

Result<uint8_t> parse_capabilities(std::string_view text) {
  uint8_t caps = 0;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (name.empty()) continue;
    bool found = false;
    for (const auto& c : kCapNames) {
      if (c.name == name) {
        caps |= static_cast<uint8_t>(c.cap);
        found = true;
      }
    }
    if (!found) {
      return make_error(ErrorCode::kInvalidArgument, "unknown capability \"" + std::string(name.substr(0, 32)) +
                                                         "\"; use any of run, exec, forward, files, mesh, cuda");
    }
  }
  return caps;
}

Result<uint64_t> parse_size(std::string_view text) {
  return parse_number_with_suffix(text, "size (like 512M, 20G, 1T)",
                                  {{'K', 1ull << 10}, {'M', 1ull << 20}, {'G', 1ull << 30}, {'T', 1ull << 40}}, 1);
}

Result<uint64_t> parse_resource_size(std::string_view text, std::string_view flag) {
  std::string f(flag), t(text.substr(0, 32));
  if (!text.empty() && text.back() >= '0' && text.back() <= '9') {
    return make_error(ErrorCode::kInvalidArgument, f + " " + t + " has no unit: write " + t + "G for " + t +
                                                       " GiB or " + t + "M for " + t + " MiB");
  }
  auto n = parse_size(text);
  if (!n) return Error(n.error()).with_context(f);
  if (*n < (1ull << 20)) {
    return make_error(ErrorCode::kInvalidArgument, f + " " + t + " is less than 1 MiB: give it in M or G (like 512M)");
  }
  return n;
}

Result<uint32_t> parse_duration_s(std::string_view text) {
  auto r = parse_number_with_suffix(text, "duration (like 90s, 30m, 2h, 1d)",
                                    {{'S', 1}, {'M', 60}, {'H', 3600}, {'D', 86400}}, 1);
  if (!r) return std::move(r).error();
  if (*r > UINT32_MAX) return make_error(ErrorCode::kInvalidArgument, "duration is too long");
  return static_cast<uint32_t>(*r);
}

Scope narrower_of(const Scope& a, const Scope& b) {
  auto least = [](auto x, auto y) { return x == 0 ? y : (y == 0 ? x : std::min(x, y)); };
  Scope s;
  s.capabilities = a.capabilities & b.capabilities;
  s.gpus = least(a.gpus, b.gpus);
  s.vram_bytes = least(a.vram_bytes, b.vram_bytes);
  s.max_time_s = least(a.max_time_s, b.max_time_s);
  s.max_jobs = least(a.max_jobs, b.max_jobs);
  s.cpus_milli = least(a.cpus_milli, b.cpus_milli);
  s.memory_bytes = least(a.memory_bytes, b.memory_bytes);
  s.disk_bytes = least(a.disk_bytes, b.disk_bytes);
  s.egress = a.egress && b.egress;
  return s;
}

std::string format_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<double>(static_cast<uint64_t>(v)) ? "%.0f %s" : "%.1f %s", v,
                units[u]);
  return buf;
}

std::string format_duration(uint64_t s) {
  if (s % 86400 == 0 && s >= 86400) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0 && s >= 3600) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0 && s >= 60) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

nlohmann::json scope_to_json(const Scope& s) {
  return {{"capabilities", s.capabilities_text() == "none" ? "" : s.capabilities_text()},
          {"gpus", s.gpus},
          {"vram_bytes", s.vram_bytes},
          {"max_time_s", s.max_time_s},
          {"max_jobs", s.max_jobs},
          {"cpus_milli", s.cpus_milli},
          {"memory_bytes", s.memory_bytes},
          {"disk_bytes", s.disk_bytes},
          {"egress", s.egress}};
}

Result<Scope> scope_from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& field) {
    return make_error(ErrorCode::kInvalidArgument, "scope field \"" + field + "\" is missing or has the wrong type");
  };
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "scope is not a JSON object");
  Scope s;
  auto caps_it = j.find("capabilities");
  if (caps_it == j.end() || !caps_it->is_string()) return bad("capabilities");
  auto caps = parse_capabilities(caps_it->get<std::string>());
  if (!caps) return std::move(caps).error();
  s.capabilities = *caps;
  auto get_uint = [&](const char* name, uint64_t max, auto& out) -> bool {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_unsigned() || it->template get<uint64_t>() > max) return false;
    out = static_cast<std::remove_reference_t<decltype(out)>>(it->template get<uint64_t>());
    return true;
  };
  if (!get_uint("gpus", UINT16_MAX, s.gpus)) return bad("gpus");
  if (!get_uint("vram_bytes", UINT64_MAX, s.vram_bytes)) return bad("vram_bytes");
  if (!get_uint("max_time_s", UINT32_MAX, s.max_time_s)) return bad("max_time_s");
  if (!get_uint("max_jobs", UINT16_MAX, s.max_jobs)) return bad("max_jobs");
  if (!get_uint("cpus_milli", UINT32_MAX, s.cpus_milli)) return bad("cpus_milli");
  if (!get_uint("memory_bytes", UINT64_MAX, s.memory_bytes)) return bad("memory_bytes");
  if (!get_uint("disk_bytes", UINT64_MAX, s.disk_bytes)) return bad("disk_bytes");
  auto eg = j.find("egress");
  if (eg == j.end() || !eg->is_boolean()) return bad("egress");
  s.egress = eg->get<bool>();
  return s;
}

}  // namespace yonder
