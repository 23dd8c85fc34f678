// Load (issue 11): 100 consumer sessions, 1,000 small jobs through the real
// dockerd on one provider, a slow reader on a chatty job's log and another
// peer asking all along (support/load_scenario.h). Checked here: every job
// accounted for exactly once with its own output and exit 0, the slow
// reader gets the whole log, the other peer keeps getting answers, the
// provider survives with bounded memory and descriptors. Timing is for
// bench/load_bench.cpp; nothing here asserts a duration.
//
// YONDER_LOAD_JOBS and YONDER_LOAD_SESSIONS make it smaller for a quick
// local run; CI runs the sizes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "support/load_scenario.h"

namespace yonder::testing {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// Sanitizer builds carry shadow memory and quarantine: a bigger ceiling.
// GCC says so with __SANITIZE_*__, clang 14 with __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define YONDER_LOAD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define YONDER_LOAD_SANITIZED 1
#endif
#endif
bool sanitized() {
#ifdef YONDER_LOAD_SANITIZED
  return true;
#else
  return false;
#endif
}

TEST(Load, HundredSessionsThousandJobsSlowReaderAndAnotherPeer) {
  LoadOptions options;
  options.sessions = env_int("YONDER_LOAD_SESSIONS", 100);
  options.jobs = env_int("YONDER_LOAD_JOBS", 1000);
  options.idle_samples = 5;
  LoadReport r = run_load(options);
  ASSERT_EQ(r.setup_error, "");

  // Every job accounted for: submitted once, ended exited with code 0,
  // its own output and nothing else; no job id twice.
  std::set<std::string> ids;
  std::map<std::string, int> failures;
  for (const auto& job : r.jobs) {
    std::string want = "job-" + std::to_string(job.index) + "\n";
    if (!job.error.empty()) {
      ++failures[job.error.substr(0, 120)];
    } else if (job.state != "exited" || job.exit_code != 0 || job.stdout_text != want) {
      ++failures["ended " + job.state + " code " + std::to_string(job.exit_code) + " output '" +
                 job.stdout_text.substr(0, 40) + "'"];
    }
    if (!job.job_id.empty()) {
      EXPECT_TRUE(ids.insert(job.job_id).second) << "job id " << job.job_id << " twice";
    }
  }
  EXPECT_EQ(r.jobs.size(), static_cast<size_t>(options.jobs));
  for (const auto& [what, n] : failures) ADD_FAILURE() << n << " job(s): " << what;
  // The provider's view agrees: each session's jobs, no more, no fewer.
  EXPECT_EQ(r.listed_errors, 0) << r.list_error;
  EXPECT_EQ(r.listed_jobs, options.jobs);

  // The slow reader got the chatty job's whole log, in order.
  EXPECT_EQ(r.slow_error, "");
  std::string want;
  for (int i = 0; i < options.chatty_lines; ++i) want += chatty_line(i);
  EXPECT_EQ(r.slow_text.size(), want.size());
  EXPECT_TRUE(r.slow_text == want) << "the slow reader's copy differs from what the job printed";

  // The other peer kept getting answers while the load ran.
  EXPECT_EQ(r.observer_failures, 0) << r.observer_error;
  EXPECT_FALSE(r.info_load.empty());
  EXPECT_FALSE(r.list_load.empty());

  // The provider survived, with bounded memory and descriptors: generous
  // ceilings that a per-job leak over 1,000 jobs would cross.
  EXPECT_TRUE(r.provider_alive) << r.provider_log_tail;
  uint64_t ceiling_kib = (sanitized() ? 1536u : 512u) * 1024u;
  EXPECT_LT(r.rss_peak_kib, ceiling_kib) << "provider RSS peaked at " << r.rss_peak_kib / 1024 << " MiB";
  EXPECT_LT(r.memory_after.hwm_kib, ceiling_kib);
  EXPECT_LT(r.fds_peak, r.fds_before + 4 * options.max_concurrent + options.sessions + 200)
      << "open descriptors: " << r.fds_before << " before, " << r.fds_peak << " at the peak";
  EXPECT_LT(r.fds_after, r.fds_before + 64) << "descriptors left open after the load: " << r.fds_after << " vs "
                                            << r.fds_before << " before";

  std::printf("load: %d jobs over %d sessions in %.1f s (%.1f jobs/s); provider RSS %llu -> peak %llu MiB, fds %d -> "
              "peak %d -> %d; slow reader %llu bytes during the load\n",
              options.jobs, options.sessions, r.load_seconds, options.jobs / std::max(r.load_seconds, 0.001),
              static_cast<unsigned long long>(r.memory_before.rss_kib / 1024),
              static_cast<unsigned long long>(r.rss_peak_kib / 1024), r.fds_before, r.fds_peak, r.fds_after,
              static_cast<unsigned long long>(r.slow_bytes_during_load));
}

}  // namespace
}  // namespace yonder::testing
