#include "mesh/core/benchmark.h"

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

// The rest of `line` after `prefix`, kept to printable ASCII, at most `max` bytes.
std::string printable_rest(std::string_view line, size_t prefix, size_t max) {
  std::string out;
  for (size_t i = prefix; i < line.size() && out.size() < max; ++i) {
    char c = line[i];
    if (c >= 0x20 && c < 0x7f) out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Calls `each` with every line of the first kMaxOutputScan bytes.
template <typename F>
void for_each_line(std::string_view text, F each) {
  text = text.substr(0, std::min(text.size(), kMaxOutputScan));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!each(line)) return;
  }
}

constexpr std::string_view kGpuLine = "yonder-benchmark-gpu name=";
constexpr std::string_view kErrorLine = "yonder-benchmark-error ";
constexpr size_t kMaxErrorBytes = 200;

}  // namespace

std::string gpu_benchmark_command(const BenchmarkSpec& spec) {
  // The generator and checksum run in Python on the host side of the
  // job (2 n^2 draws and n^2 steps: well under a second at n = 512); only
  // the product runs on the device, timed between two synchronisations.
  std::string program =
      "import sys, time\n"
      "n, seed, p = " + std::to_string(spec.n) + ", " + std::to_string(spec.seed) + ", " +
      std::to_string(kBenchmarkModulus) + "\n"
      "try:\n"
      "    import torch\n"
      "except Exception as e:\n"
      "    print('yonder-benchmark-error the image has no PyTorch: %s' % e)\n"
      "    sys.exit(3)\n"
      "if not torch.cuda.is_available():\n"
      "    print('yonder-benchmark-error PyTorch sees no CUDA device in the job')\n"
      "    sys.exit(3)\n"
      "x, v = seed, []\n"
      "for _ in range(2 * n * n):\n"
      "    x = x * 48271 % 2147483647\n"
      "    v.append(x % p)\n"
      "dev = torch.device('cuda:0')\n"
      "a = torch.tensor(v[:n * n], dtype=torch.float64, device=dev).reshape(n, n)\n"
      "b = torch.tensor(v[n * n:], dtype=torch.float64, device=dev).reshape(n, n)\n"
      "torch.cuda.synchronize()\n"
      "t0 = time.monotonic()\n"
      "c = torch.remainder(a @ b, p)\n"
      "torch.cuda.synchronize()\n"
      "t1 = time.monotonic()\n"
      "h = 0\n"
      "for s in c.to(torch.int64).cpu().reshape(-1).tolist():\n"
      "    h = (h * 31 + s) % p\n"
      "print('yonder-benchmark-gpu name=%s' % torch.cuda.get_device_name(0))\n"
      "print('yonder-benchmark n=%d seed=%d checksum=%d' % (n, seed, h))\n"
      "print('yonder-benchmark-time start=%.6f end=%.6f' % (t0, t1))\n";
  // A quoted here-document: the shell expands nothing inside it.
  return "if command -v python3 >/dev/null 2>&1; then py=python3; elif command -v python >/dev/null 2>&1; then "
         "py=python; else echo 'yonder-benchmark-error the image has no python3 or python'; exit 3; fi\n"
         "exec \"$py\" - <<'YONDER_GPU_BENCHMARK'\n" +
         program + "YONDER_GPU_BENCHMARK\n";
}

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
  std::optional<BenchmarkOutput> out;
  std::optional<double> t0, t1;
  std::string gpu_name;
  bool bad = false;
  for_each_line(text, [&](std::string_view line) {
    if (line.rfind("yonder-benchmark ", 0) == 0 && !out) {
      auto n = number<uint32_t>(field(line, "n"));
      auto seed = number<uint32_t>(field(line, "seed"));
      auto checksum = number<uint64_t>(field(line, "checksum"));
      if (!n || !seed || !checksum) {
        bad = true;
        return false;
      }
      out = BenchmarkOutput{*n, *seed, *checksum, std::nullopt, {}};
    } else if (line.rfind("yonder-benchmark-time ", 0) == 0) {
      t0 = number<double>(field(line, "start"));
      t1 = number<double>(field(line, "end"));
    } else if (line.rfind(kGpuLine, 0) == 0 && gpu_name.empty()) {
      gpu_name = printable_rest(line, kGpuLine.size(), kMaxGpuNameBytes);
    }
    return true;
  });
  if (bad || !out) return std::nullopt;
  if (t0 && t1 && *t1 >= *t0 && *t1 - *t0 < 1e7) out->seconds = *t1 - *t0;
  out->gpu_name = std::move(gpu_name);
  return out;
}

std::optional<std::string> benchmark_error(std::string_view text) {
  std::optional<std::string> why;
  for_each_line(text, [&](std::string_view line) {
    if (line.rfind(kErrorLine, 0) != 0) return true;
    why = printable_rest(line, kErrorLine.size(), kMaxErrorBytes);
    return false;
  });
  return why;
}

}  // namespace yonder::mesh
