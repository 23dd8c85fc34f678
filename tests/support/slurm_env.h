// What integration tests need from a real Slurm cluster: the one-node
// cluster scripts/slurm.sh starts (SLURM_CONF from YONDER_SLURM_CONF, else
// /run/yonder-slurm/slurm.conf) and a folder every node sees for job files.
//
// Without YONDER_REQUIRE_SLURM a missing cluster skips the test with the
// reason; scripts/test.sh sets it when it started Slurm, so in CI a cluster
// that does not answer fails.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "os/process.h"

namespace yonder::testing {

inline std::string slurm_conf() {
  const char* s = std::getenv("YONDER_SLURM_CONF");
  return s != nullptr && *s != '\0' ? s : "/run/yonder-slurm/slurm.conf";
}

// A folder for job files that the job user (nobody) can reach: the cluster's
// world-writable work folder, next to slurm.conf.
inline std::string slurm_work_root() {
  std::string conf = slurm_conf();
  return conf.substr(0, conf.rfind('/')) + "/work";
}

inline bool slurm_answers() {
  if (::access(slurm_conf().c_str(), R_OK) != 0) return false;
  auto r = os::run_capture({"/usr/bin/env", "SLURM_CONF=" + slurm_conf(), "sinfo", "-h", "-o", "%T"},
                           std::chrono::seconds(10));
  return r.ok() && r->exit_code == 0 && !r->output.empty();
}

inline bool slurm_required() {
  const char* v = std::getenv("YONDER_REQUIRE_SLURM");
  return v != nullptr && std::string(v) == "1";
}

// Runs a Slurm command against the test cluster; its output.
inline std::string slurm_command(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/env", "SLURM_CONF=" + slurm_conf()});
  auto r = os::run_capture(argv, std::chrono::seconds(30));
  return r.ok() ? r->output : r.error().to_string();
}

}  // namespace yonder::testing

#define YONDER_REQUIRE_SLURM_OR_SKIP()                                                                      \
  do {                                                                                                      \
    if (!::yonder::testing::slurm_answers()) {                                                              \
      if (::yonder::testing::slurm_required()) {                                                            \
        FAIL() << "YONDER_REQUIRE_SLURM=1 but no Slurm cluster answers with "                              \
               << ::yonder::testing::slurm_conf() << "; run scripts/slurm.sh start";                        \
      }                                                                                                     \
      GTEST_SKIP() << "no Slurm cluster answers with SLURM_CONF=" << ::yonder::testing::slurm_conf()        \
                   << " (start one with scripts/slurm.sh start, or set YONDER_REQUIRE_SLURM=1 to fail)";   \
    }                                                                                                       \
  } while (0)
