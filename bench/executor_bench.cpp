// Container start overhead of the executor against the anchor `docker run
// --rm` for the same image and command (`true`), side by side.
//
//   A: docker run --rm yonder-test/busybox:1 true        (the Docker CLI)
//   B: DockerExecutor, full life: image and policy check, per-job ext4
//      workspace (mkfs + loop mount), hardened create, start, wait,
//      remove, unmount, delete the workspace
//   C: the same without the workspace (what the Engine API calls cost)
//
// Measured A B C, A B C, ... over --pairs rounds (default 7), reporting the
// ratios B/A and C/A per round and their medians, because this machine's
// speed drifts by tens of percent over minutes. Goal: B/A <= 1.05.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "exec/docker/docker_executor.h"
#include "os/process.h"
#include "os/unix_http.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace yonder;
constexpr const char* kImage = "yonder-test/busybox:1";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double run_cli() {
  auto t0 = Clock::now();
  auto r = os::run_capture({"docker", "run", "--rm", kImage, "true"}, std::chrono::seconds(60));
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "docker run failed: %s\n", r ? r->output.c_str() : r.error().to_string().c_str());
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double run_executor(exec::docker::DockerExecutor& executor, int n) {
  exec::TaskSpec spec;
  spec.job_id = "bench" + std::to_string(n) + std::to_string(std::random_device{}() % 100000);
  spec.image = kImage;
  spec.command = {"true"};
  spec.limits.memory_bytes = 256 << 20;
  spec.limits.tmp_bytes = 64 << 20;
  spec.limits.disk_bytes = 64 << 20;
  auto t0 = Clock::now();
  auto h = executor.start(spec);
  if (!h) {
    std::fprintf(stderr, "executor start failed: %s\n", h.error().to_string().c_str());
    std::exit(1);
  }
  auto exit = executor.wait(*h, {});
  auto destroyed = executor.destroy(*h, true);
  if (!exit || exit->exit_code != 0 || !destroyed) {
    std::fprintf(stderr, "executor run failed\n");
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 7;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
  }
  auto ping = os::unix_http_request("/var/run/docker.sock", "GET", "/_ping");
  if (!ping || ping->status != 200) {
    const char* req = std::getenv("YONDER_REQUIRE_DOCKER");
    std::printf("executor_bench: no Docker engine answers; skipped\n");
    return req != nullptr && std::string(req) == "1" ? 1 : 0;
  }
  char tmpl[] = "/tmp/yeb-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto make = [&](bool workspaces) {
    exec::docker::DockerOptions o;
    o.owner = "bench-" + std::to_string(std::random_device{}());
    o.jobs_dir = dir;
    o.images = *exec::ImagePolicy::parse("yonder-test/*", "never");
    o.workspaces = workspaces;
    return std::make_unique<exec::docker::DockerExecutor>(std::move(o));
  };
  auto full = make(true);
  auto bare = make(false);
  run_cli();  // warm both paths once (page cache, image layers)
  run_executor(*full, -1);
  std::vector<double> ratio_full, ratio_bare, a_ms, b_ms, c_ms;
  std::printf("%-5s %12s %12s %12s %8s %8s\n", "pair", "docker run", "executor", "no-wksp", "B/A", "C/A");
  for (int i = 0; i < pairs; ++i) {
    double a = run_cli();
    double b = run_executor(*full, i);
    double c = run_executor(*bare, i);
    a_ms.push_back(a);
    b_ms.push_back(b);
    c_ms.push_back(c);
    ratio_full.push_back(b / a);
    ratio_bare.push_back(c / a);
    std::printf("%-5d %10.1fms %10.1fms %10.1fms %8.3f %8.3f\n", i + 1, a, b, c, b / a, c / a);
  }
  std::printf("median %9.1fms %10.1fms %10.1fms %8.3f %8.3f   (goal B/A <= 1.05)\n", median(a_ms), median(b_ms),
              median(c_ms), median(ratio_full), median(ratio_bare));
  ::rmdir(dir.c_str());
  return 0;
}
