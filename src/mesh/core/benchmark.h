// The known-answer benchmark: a job whose answer the consumer
// can check without trusting the provider. Pure: builds the job's program
// and computes the answer it must print; the node runs it through the
// ordinary remote-job path (mesh/consumer/mesh_benchmark.h).
//
// The job: A and B are n x n matrices of integers mod p (p = 65521) drawn
// from a seeded Lehmer generator (x <- 48271 x mod 2^31-1, MINSTD); the job
// computes C = A B mod p and prints a checksum of C (row-major, h <- (31 h
// + c) mod p). Written in POSIX awk so that any image with a shell and awk
// can run it (the test image's busybox, Debian's mawk): awk numbers are
// doubles, so every intermediate stays below 2^53 to be exact (x < 2^31
// times 48271 < 2^16; products of entries < 2^32; sums < 2^33).
//
// What it proves, honestly: that the provider ran the computation and
// returned the right answer (a wrong or made-up answer fails), and how
// long it took (timed inside the job from /proc/uptime, so the provider
// reports the time: a rate, not a proof). The CPU program says nothing
// about the GPU model the provider advertises.
//
// The GPU check (gpu_benchmark_command) computes the same product on the
// GPU: a Python program for an image with PyTorch and CUDA (the provider's
// own, named by mesh.gpu_benchmark_image), float64 on `cuda:0` (exact:
// every partial sum stays below n * 65520^2 < 2^42 for n <= 512, far under
// 2^53, whatever order cuBLAS adds in; TF32 never applies to float64), the
// checksum taken on the host. It prints the device's name as the CUDA
// driver reports it. What it proves: a CUDA device the job could open
// computed the right answer, and its driver names the model the
// advertisement claims. A provider that controls the host can still lie
// about the name; it cannot pass without a working CUDA stack in the
// container (no torch or no device: the error line below, exit 3).
//
// Output contract (stdout, one line each):
//   yonder-benchmark n=N seed=S checksum=H
//   yonder-benchmark-time start=T0 end=T1      (seconds, e.g. /proc/uptime)
//   yonder-benchmark-gpu name=NAME             (the GPU check only; NAME to the end of the line)
//   yonder-benchmark-error WHY                 (the GPU check, when it cannot run)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace yonder::mesh {

inline constexpr uint32_t kBenchmarkModulus = 65521;
inline constexpr uint32_t kMaxBenchmarkSize = 512;
inline constexpr uint32_t kDefaultBenchmarkSize = 64;

struct BenchmarkSpec {
  uint32_t n = kDefaultBenchmarkSize;  // 1..kMaxBenchmarkSize
  uint32_t seed = 1;                   // 1..2^31-2 (the generator's state must not be 0)
};

// The shell command (for `sh -c`) that runs the job and prints the lines above.
std::string benchmark_command(const BenchmarkSpec& spec);
// The same check on the GPU (see above): a shell command that runs the
// Python program with python3 (or python) from the image.
std::string gpu_benchmark_command(const BenchmarkSpec& spec);
// The checksum a correct run prints.
uint32_t benchmark_expected(const BenchmarkSpec& spec);

struct BenchmarkOutput {
  uint32_t n = 0;
  uint32_t seed = 0;
  uint64_t checksum = 0;
  std::optional<double> seconds;  // end - start, when the time line is there and sane
  std::string gpu_name;           // the GPU check's device name: printable ASCII, at most kMaxGpuNameBytes
};
inline constexpr size_t kMaxGpuNameBytes = 128;
// Reads the job's stdout (bounded: only the first 64 KiB are looked at);
// nullopt when the result line is missing or malformed.
std::optional<BenchmarkOutput> parse_benchmark_output(std::string_view stdout_text);
// The GPU check's "yonder-benchmark-error WHY" line, WHY cut to printable
// ASCII of at most 200 bytes; nullopt when there is none.
std::optional<std::string> benchmark_error(std::string_view stdout_text);

}  // namespace yonder::mesh
