// What a provider job printed so far, as one string (stdout and stderr in
// the log's order), for the job manager's tests over either engine.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "jobs/provider/provider_jobs.h"

namespace yonder::jobs::provider {

inline std::string job_output(ProviderJobs& jobs, const std::string& id) {
  std::string out;
  auto read = jobs.read_log(JobId(id), 0, 1 << 20);
  EXPECT_TRUE(read.ok()) << read.error().to_string();
  if (read) {
    for (auto& r : read->slice.records) out += r.data;
  }
  return out;
}

}  // namespace yonder::jobs::provider
