// The known-answer benchmark (issue 10): a job whose answer the consumer
// can check without trusting the provider. Pure: builds the job's program
// and computes the answer it must print; the node runs it through the
// ordinary remote-job path (node/mesh_benchmark.h).
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
// reports the time: a rate, not a proof). A CPU awk program says nothing
// by itself about the GPU model the provider advertises; on a real GPU box
// set mesh.benchmark_image to an image whose command runs the same check
// as a CUDA matrix product (the output format below is the contract).
//
// Output contract (stdout, one line each):
//   yonder-benchmark n=N seed=S checksum=H
//   yonder-benchmark-time start=T0 end=T1      (seconds, e.g. /proc/uptime)
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
// The checksum a correct run prints.
uint32_t benchmark_expected(const BenchmarkSpec& spec);

struct BenchmarkOutput {
  uint32_t n = 0;
  uint32_t seed = 0;
  uint64_t checksum = 0;
  std::optional<double> seconds;  // end - start, when the time line is there and sane
};
// Reads the job's stdout (bounded: only the first 64 KiB are looked at);
// nullopt when the result line is missing or malformed.
std::optional<BenchmarkOutput> parse_benchmark_output(std::string_view stdout_text);

}  // namespace yonder::mesh
