// The load scenario of issue 11, shared by tests/integration/load_test.cpp
// (which checks it) and bench/load_bench.cpp (which prints its figures):
//
//   one provider yonderd (fake GPUs, the real dockerd), paired with
//   `sessions` consumer sessions (support/load_swarm.h) through one share link;
//   `jobs` small jobs (`echo job-i`) submitted by them all at once, each
//   followed to its end with run.logs long-polls, then run.inspect;
//   a slow reader following a chatty job's log (one read per `slow_pause`
//   while the load runs, then at full speed to the end);
//   another peer (its own session) timing node.info and run.list round trips,
//   idle before the load and again during it;
//   the provider's VmRSS and open descriptors sampled from /proc throughout.
//
// Needs the yonder and yonderd programs (YONDER_BIN_*), dockerd and the test
// image. Cleans up after itself: the daemon (by PID), its containers (by
// owner label), workspace mounts and the temporary folder.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/load_swarm.h"

namespace yonder::testing {

struct LoadOptions {
  int sessions = 100;
  int jobs = 1000;
  int max_concurrent = 8;  // the provider's jobs.max_concurrent
  int chatty_lines = 50000;
  std::chrono::milliseconds slow_pause{1000};
  int idle_samples = 40;
  std::string image = "yonder-test/busybox:1";
  std::chrono::seconds deadline{900};
};

struct LoadReport {
  std::string setup_error;  // non-empty: the scenario could not run (nothing else is set)
  std::vector<LoadJob> jobs;
  double load_seconds = 0;  // first submit to the last job accounted for
  // Provider memory (KiB) and descriptors: before the load, the highest
  // seen while it ran, after it.
  ProcessMemory memory_before, memory_after;
  uint64_t rss_peak_kib = 0;
  int fds_before = -1, fds_peak = -1, fds_after = -1;
  // Another peer's round trips, idle and under load; calls that failed.
  std::vector<std::chrono::nanoseconds> info_idle, info_load, list_idle, list_load;
  int observer_failures = 0;
  std::string observer_error;  // the first failure
  // The slow reader.
  std::string chatty_job_id;
  std::string slow_error;
  std::string slow_text;
  uint64_t slow_bytes_during_load = 0;  // read while the load ran
  double slow_seconds = 0;
  // After the load: run.list per session (the provider's own view).
  int listed_jobs = 0;
  int listed_errors = 0;
  std::string list_error;
  bool provider_alive = false;
  std::string provider_log_tail;  // for failure messages
};

LoadReport run_load(const LoadOptions& options);

// What the chatty job prints, line by line (for checking the slow reader).
std::string chatty_line(int i);

}  // namespace yonder::testing
