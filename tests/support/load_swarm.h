// Many consumer sessions against one provider from one process, for the load
// test and bench (issue 11). Each session is a consumer as the provider sees
// it: its own Ed25519 identity, paired through a share link, its own TLS
// session over loopback, speaking the same run.* link methods a consumer
// yonderd speaks (jobs/provider/remote_provider.h). A hundred yonderd processes would
// cost a 2-core CI machine more than the provider under test; this costs one
// thread per Swarm.
//
// Threading: a Swarm owns one io_context thread on which its link services
// run; the public methods block the caller (never call them on that thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace yonder::testing {

using LoadClock = std::chrono::steady_clock;

// One submitted job as the consumer saw it, start to end.
struct LoadJob {
  int index = 0;      // job i runs `echo job-i`
  int session = 0;    // which of the swarm's sessions submitted it
  std::string job_id;
  std::string stdout_text;  // every stdout record, in order
  std::string state;        // from run.inspect once the log said "ended"
  int exit_code = -1;
  std::string error;        // why it is not accounted for, if it is not
  int log_retries = 0;      // run.logs calls that failed and were repeated
  std::chrono::nanoseconds submit_latency{0};
  LoadClock::time_point submitted_at{}, ended_at{};
};

class Swarm {
 public:
  // `sessions` identities, none paired yet.
  explicit Swarm(int sessions);
  ~Swarm();
  Swarm(const Swarm&) = delete;
  Swarm& operator=(const Swarm&) = delete;

  int size() const;
  // Pairs every session with the provider through `link` (a share link
  // with enough uses), all at once. Fails with the first error.
  Status pair_all(const std::string& link);
  // One request from session `session`; blocks until the answer.
  Result<nlohmann::json> call(int session, const std::string& method, const nlohmann::json& params);
  // Submits `jobs` jobs (`echo job-i`, image `image`, round robin over the
  // sessions, all at once), follows each one's log (run.logs long-polls)
  // until it ended, then asks run.inspect how it ended. Returns when every
  // job is accounted for or `deadline` passed (the rest carry an error).
  std::vector<LoadJob> run_jobs(int jobs, const std::string& image, LoadClock::time_point deadline);

  // Reads a job's whole log through session 0, one run.logs call at a time
  // and `pause` between calls while `slow()` says so (then at full speed),
  // until the log ended. Returns the stdout text. `progress` (optional) is
  // called with the bytes read so far after each call, on the swarm thread.
  Result<std::string> read_log(const std::string& job_id, std::chrono::milliseconds pause, std::function<bool()> slow,
                               LoadClock::time_point deadline, std::function<void(uint64_t)> progress = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// VmRSS and VmHWM of a process in KiB (0 when it cannot be read).
struct ProcessMemory {
  uint64_t rss_kib = 0;
  uint64_t hwm_kib = 0;
};
ProcessMemory read_process_memory(int pid);
// Open file descriptors of a process (-1 when it cannot be read).
int count_open_fds(int pid);

// Nearest-rank percentile (p in 0..100) of `samples` (sorted here).
double percentile_ms(std::vector<std::chrono::nanoseconds> samples, double p);

}  // namespace yonder::testing
