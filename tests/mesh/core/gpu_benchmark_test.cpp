// The GPU known-answer check's program (mesh/core/benchmark.h), run for real by
// the shell and Python of this machine against a test double of PyTorch's
// CUDA surface (tests/mesh/core/torch_double: CPU arithmetic, a device name
// from the environment): its answer must be the one benchmark_expected
// computes, its device line must parse, and without a device it must say
// so and fail. The same program on a real GPU: the last test, with
// YONDER_EXPECT_GPU=1 on a machine with a CUDA PyTorch (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "mesh/core/benchmark.h"
#include "support/subprocess.h"

namespace yonder::mesh {
namespace {

using yonder::testing::Env;
using yonder::testing::RunResult;

RunResult run_check(const BenchmarkSpec& spec, const std::string& device) {
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "YONDER_SOURCE_DIR is set by CMake for every test";
  Env env = {{"PYTHONPATH", std::string(src ? src : ".") + "/tests/mesh/core/torch_double"},
             {"YONDER_TORCH_DOUBLE_DEVICE", device}};
  return yonder::testing::run({"/bin/sh", "-c", gpu_benchmark_command(spec)}, env);
}

TEST(GpuBenchmark, TheProgramsAnswerIsTheOneComputedHereAndNamesTheDevice) {
  for (BenchmarkSpec spec : {BenchmarkSpec{1, 7}, BenchmarkSpec{12, 12345}, BenchmarkSpec{9, 2147483646u}}) {
    RunResult r = run_check(spec, "NVIDIA H200");
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto out = parse_benchmark_output(r.out);
    ASSERT_TRUE(out.has_value()) << r.out;
    EXPECT_EQ(out->n, spec.n);
    EXPECT_EQ(out->seed, spec.seed);
    EXPECT_EQ(out->checksum, benchmark_expected(spec)) << "n=" << spec.n << " seed=" << spec.seed;
    EXPECT_EQ(out->gpu_name, "NVIDIA H200");
    EXPECT_TRUE(out->seconds.has_value()) << r.out;
    EXPECT_FALSE(benchmark_error(r.out).has_value());
  }
}

TEST(GpuBenchmark, WithoutACudaDeviceTheProgramSaysSoAndFails) {
  RunResult r = run_check(BenchmarkSpec{4, 1}, "");
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_FALSE(parse_benchmark_output(r.out).has_value()) << r.out;
  auto why = benchmark_error(r.out);
  ASSERT_TRUE(why.has_value()) << r.out;
  EXPECT_NE(why->find("no CUDA device"), std::string::npos) << *why;
}

TEST(GpuBenchmark, AnImageWithoutPyTorchIsNamedAsTheReason) {
  // No PYTHONPATH to the double: this machine's Python has no torch.
  Env env = {{"PYTHONPATH", "/nonexistent"}};
  RunResult r = yonder::testing::run({"/bin/sh", "-c", gpu_benchmark_command(BenchmarkSpec{4, 1})}, env);
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  auto why = benchmark_error(r.out);
  ASSERT_TRUE(why.has_value()) << r.out;
  EXPECT_NE(why->find("no PyTorch"), std::string::npos) << *why;
}

TEST(GpuBenchmark, TheDeviceLineIsBoundedAndPrintable) {
  std::string line = "yonder-benchmark n=2 seed=1 checksum=5\nyonder-benchmark-gpu name=ev\x1b]52;c;AAAA\ail" +
                     std::string(500, 'x') + "\n";
  auto out = parse_benchmark_output(line);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->gpu_name.find('\x1b'), std::string::npos);
  EXPECT_EQ(out->gpu_name.find('\a'), std::string::npos);
  EXPECT_EQ(out->gpu_name.size(), kMaxGpuNameBytes);
  EXPECT_EQ(out->gpu_name.rfind("ev]52;c;AAAAil", 0), 0u) << out->gpu_name;
}

// On a GPU machine (YONDER_EXPECT_GPU=1): the program with the real
// PyTorch and CUDA gives the answer computed here and names the device
// (YONDER_EXPECT_GPU_NAME, when set, e.g. from nvidia-smi, must match it).
TEST(GpuBenchmark, OnARealGpuTheProgramsAnswerIsRight) {
  const char* expect = std::getenv("YONDER_EXPECT_GPU");
  if (expect == nullptr || std::string(expect) != "1") {
    GTEST_SKIP() << "no GPU expected here; set YONDER_EXPECT_GPU=1 on a machine with a CUDA PyTorch";
  }
  for (BenchmarkSpec spec : {BenchmarkSpec{64, 99}, BenchmarkSpec{kMaxBenchmarkSize, 2147483646u}}) {
    RunResult r = yonder::testing::run({"/bin/sh", "-c", gpu_benchmark_command(spec)});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto out = parse_benchmark_output(r.out);
    ASSERT_TRUE(out.has_value()) << r.out;
    EXPECT_EQ(out->checksum, benchmark_expected(spec)) << "n=" << spec.n;
    EXPECT_FALSE(out->gpu_name.empty()) << r.out;
    if (const char* name = std::getenv("YONDER_EXPECT_GPU_NAME")) {
      EXPECT_EQ(out->gpu_name, name);
    }
    std::printf("GPU check n=%u on \"%s\": %.6f s\n", spec.n, out->gpu_name.c_str(), out->seconds.value_or(-1));
  }
}

}  // namespace
}  // namespace yonder::mesh
