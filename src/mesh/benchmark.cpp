#include "mesh/benchmark.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace yonder::mesh {
namespace {

constexpr uint64_t kLehmerModulus = 2147483647;  // 2^31 - 1
constexpr uint64_t kLehmerMultiplier = 48271;
constexpr size_t kMaxOutputScan = 64 * 1024;

// "key=VALUE" in `line` -> VALUE (digits and one dot at most), or nullopt.
std::optional<std::string_view> field(std::string_view line, std::string_view key) {
  std::string needle = " " + std::string(key) + "=";
  size_t at = line.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  size_t start = at + needle.size(), end = start;
  while (end < line.size() && ((line[end] >= '0' && line[end] <= '9') || line[end] == '.')) ++end;
  if (end == start) return std::nullopt;
  return line.substr(start, end - start);
}

template <typename T>
std::optional<T> number(std::optional<std::string_view> s) {
  if (!s) return std::nullopt;
  T v{};
  auto r = std::from_chars(s->data(), s->data() + s->size(), v);
  if (r.ec != std::errc() || r.ptr != s->data() + s->size()) return std::nullopt;
  return v;
}

}  // namespace

std::string benchmark_command(const BenchmarkSpec& spec) {
  std::string n = std::to_string(spec.n), seed = std::to_string(spec.seed), p = std::to_string(kBenchmarkModulus);
  std::string awk =
      "BEGIN { n = " + n + "; p = " + p + "; x = " + seed +
      "; "
      "for (i = 0; i < n; i++) for (j = 0; j < n; j++) { x = (x * 48271) % 2147483647; a[i * n + j] = x % p }; "
      "for (i = 0; i < n; i++) for (j = 0; j < n; j++) { x = (x * 48271) % 2147483647; b[i * n + j] = x % p }; "
      "h = 0; "
      "for (i = 0; i < n; i++) for (j = 0; j < n; j++) { s = 0; "
      "for (k = 0; k < n; k++) s = (s + a[i * n + k] * b[k * n + j]) % p; h = (h * 31 + s) % p }; "
      "printf \"yonder-benchmark n=%d seed=%d checksum=%d\\n\", n, " +
      seed + ", h }";
  return "read t0 rest < /proc/uptime; awk '" + awk +
         "' || exit 1; read t1 rest < /proc/uptime; echo \"yonder-benchmark-time start=$t0 end=$t1\"";
}

uint32_t benchmark_expected(const BenchmarkSpec& spec) {
  const uint64_t n = spec.n, p = kBenchmarkModulus;
  uint64_t x = spec.seed;
  std::vector<uint64_t> a(n * n), b(n * n);
  for (auto* m : {&a, &b}) {
    for (auto& v : *m) {
      x = (x * kLehmerMultiplier) % kLehmerModulus;
      v = x % p;
    }
  }
  uint64_t h = 0;
  for (uint64_t i = 0; i < n; ++i) {
    for (uint64_t j = 0; j < n; ++j) {
      uint64_t s = 0;
      for (uint64_t k = 0; k < n; ++k) s = (s + a[i * n + k] * b[k * n + j]) % p;
      h = (h * 31 + s) % p;
    }
  }
  return static_cast<uint32_t>(h);
}

std::optional<BenchmarkOutput> parse_benchmark_output(std::string_view text) {
  text = text.substr(0, std::min(text.size(), kMaxOutputScan));
  std::optional<BenchmarkOutput> out;
  std::optional<double> t0, t1;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.rfind("yonder-benchmark ", 0) == 0 && !out) {
      auto n = number<uint32_t>(field(line, "n"));
      auto seed = number<uint32_t>(field(line, "seed"));
      auto checksum = number<uint64_t>(field(line, "checksum"));
      if (!n || !seed || !checksum) return std::nullopt;
      out = BenchmarkOutput{*n, *seed, *checksum, std::nullopt};
    } else if (line.rfind("yonder-benchmark-time ", 0) == 0) {
      t0 = number<double>(field(line, "start"));
      t1 = number<double>(field(line, "end"));
    }
  }
  if (out && t0 && t1 && *t1 >= *t0 && *t1 - *t0 < 1e7) out->seconds = *t1 - *t0;
  return out;
}

}  // namespace yonder::mesh
