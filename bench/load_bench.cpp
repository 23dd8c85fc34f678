// Load on one provider, with figures: the scenario of
// tests/integration/load_test.cpp (support/load_scenario.h: --sessions
// consumer sessions, --jobs `echo job-i` jobs through the real dockerd, a
// slow reader on a chatty job, another peer's round trips), side by side
// with the same jobs as `docker run --rm` at the same concurrency. Prints
// jobs/s and the ratio, the provider's RSS and descriptors, the other
// peer's p50/p99 idle vs under load, and what the slow reader saw.
//
//   load_bench [--jobs=1000] [--sessions=100] [--concurrent=8] [--chatty-lines=50000]
//
// Needs the yonder and yonderd programs (YONDER_BIN_YONDER/_YONDERD),
// dockerd and the test image (scripts/build-test-image.sh).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support/load_scenario.h"
#include "support/subprocess.h"

namespace {

using namespace yonder::testing;
using Ns = std::chrono::nanoseconds;

int flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--" + name + "=", 0) == 0) return std::atoi(a.c_str() + name.size() + 3);
  }
  return fallback;
}

// `jobs` containers `echo job-i` by the docker CLI, `concurrent` at a time;
// seconds taken and how many printed the right line.
double docker_run_seconds(int jobs, int concurrent, const std::string& image, int& right) {
  std::atomic<int> next{0}, ok{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrent; ++w) {
    workers.emplace_back([&] {
      for (int i = next++; i < jobs; i = next++) {
        auto r = run({"/usr/bin/env", "docker", "run", "--rm", "--network", "none", image, "echo",
                      "job-" + std::to_string(i)});
        if (r.exit_code == 0 && r.out == "job-" + std::to_string(i) + "\n") ++ok;
      }
    });
  }
  for (auto& t : workers) t.join();
  right = ok;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

void latency_line(const char* what, const std::vector<Ns>& idle, const std::vector<Ns>& load) {
  double i50 = percentile_ms(idle, 50), i99 = percentile_ms(idle, 99);
  double l50 = percentile_ms(load, 50), l99 = percentile_ms(load, 99);
  std::printf("  %-10s idle p50 %7.2f ms p99 %7.2f ms (%zu)   under load p50 %7.2f ms p99 %7.2f ms (%zu)   ratio p50 %.1f p99 %.1f\n",
              what, i50, i99, idle.size(), l50, l99, load.size(), ratio(l50, i50), ratio(l99, i99));
}

}  // namespace

int main(int argc, char** argv) {
  LoadOptions o;
  o.jobs = flag(argc, argv, "jobs", 1000);
  o.sessions = flag(argc, argv, "sessions", 100);
  o.max_concurrent = flag(argc, argv, "concurrent", 8);
  o.chatty_lines = flag(argc, argv, "chatty-lines", 50000);

  std::printf("Load on one provider (%u cores): %d sessions, %d jobs `echo job-i`, %d at a time, slow reader on %d lines\n",
              std::thread::hardware_concurrency(), o.sessions, o.jobs, o.max_concurrent, o.chatty_lines);
  int docker_right = 0;
  run({"/usr/bin/env", "docker", "run", "--rm", "--network", "none", o.image, "true"});  // warm
  double docker_s = docker_run_seconds(o.jobs, o.max_concurrent, o.image, docker_right);

  LoadReport r = run_load(o);
  if (!r.setup_error.empty()) {
    std::fprintf(stderr, "load_bench: %s\n", r.setup_error.c_str());
    return 1;
  }
  int accounted = 0;
  std::vector<Ns> submit, turnaround;
  for (const auto& j : r.jobs) {
    if (j.error.empty() && j.state == "exited" && j.exit_code == 0 && j.stdout_text == "job-" + std::to_string(j.index) + "\n") {
      ++accounted;
    }
    submit.push_back(j.submit_latency);
    turnaround.push_back(j.ended_at - j.submitted_at);
  }
  double yonder_jps = o.jobs / std::max(r.load_seconds, 1e-9);
  double docker_jps = o.jobs / std::max(docker_s, 1e-9);
  std::printf("\nthroughput\n");
  std::printf("  yonder (submit over the link, follow logs, inspect)  %6.1f s  %6.2f jobs/s  (%d/%d accounted for)\n",
              r.load_seconds, yonder_jps, accounted, o.jobs);
  std::printf("  docker run --rm, %d at a time                         %6.1f s  %6.2f jobs/s  (%d/%d right)\n",
              o.max_concurrent, docker_s, docker_jps, docker_right, o.jobs);
  std::printf("  ratio yonder/docker jobs/s %.2f\n", ratio(yonder_jps, docker_jps));
  std::printf("  run.submit p50 %.1f ms p99 %.1f ms; submit to accounted for p50 %.1f s p99 %.1f s\n",
              percentile_ms(submit, 50), percentile_ms(submit, 99), percentile_ms(turnaround, 50) / 1000,
              percentile_ms(turnaround, 99) / 1000);
  std::printf("\nprovider yonderd\n");
  std::printf("  RSS before %llu MiB, peak %llu MiB, after %llu MiB (VmHWM %llu MiB)\n",
              static_cast<unsigned long long>(r.memory_before.rss_kib / 1024),
              static_cast<unsigned long long>(r.rss_peak_kib / 1024),
              static_cast<unsigned long long>(r.memory_after.rss_kib / 1024),
              static_cast<unsigned long long>(r.memory_after.hwm_kib / 1024));
  std::printf("  open descriptors before %d, peak %d, after %d; %s\n", r.fds_before, r.fds_peak, r.fds_after,
              r.provider_alive ? "alive and answering" : "NOT ANSWERING");
  std::printf("\nanother peer's round trips (%d failed)\n", r.observer_failures);
  latency_line("node.info", r.info_idle, r.info_load);
  latency_line("run.list", r.list_idle, r.list_load);
  std::string want;
  for (int i = 0; i < o.chatty_lines; ++i) want += chatty_line(i);
  std::printf("\nslow reader (one run.logs read per %lld ms during the load)\n",
              static_cast<long long>(o.slow_pause.count()));
  std::printf("  %llu of %zu bytes read during the load, all of it after %.1f s: %s\n",
              static_cast<unsigned long long>(r.slow_bytes_during_load), want.size(), r.slow_seconds,
              r.slow_error.empty() ? (r.slow_text == want ? "complete and in order" : "DIFFERS") : r.slow_error.c_str());
  bool good = accounted == o.jobs && r.provider_alive && r.slow_text == want && r.observer_failures == 0;
  return good ? 0 : 1;
}
