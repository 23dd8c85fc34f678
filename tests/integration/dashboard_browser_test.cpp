// The web dashboard in a real browser (issue 8): a provider and a consumer
// daemon paired over loopback, and headless Chromium driven over WebDriver
// by dashboard_browser_check.py (standard-library Python, chromedriver): it
// logs in through `yonder dashboard`'s one-time URL, watches a running job's
// logs arrive live, stops the job, revokes a share link, checks the audit
// chain and the pages' security headers, and saves screenshots of the main
// pages to Testing/artifacts/dashboard/ in the build folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

bool browser_installed() {
  return ::access("/usr/bin/chromedriver", X_OK) == 0 &&
         (::access("/usr/lib/chromium/chromium", X_OK) == 0 || ::access("/usr/bin/chromium", X_OK) == 0);
}

TEST(DashboardBrowser, LogsInFollowsLogsStopsJobsRevokesLinks) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  if (!browser_installed()) {
    // CI (YONDER_REQUIRE_DOCKER=1) installs everything in scripts/packages.txt.
    if (docker_required()) FAIL() << "chromium and chromium-driver are missing; run scripts/setup.sh";
    GTEST_SKIP() << "chromium and chromium-driver are missing; run scripts/setup.sh";
  }
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string src = std::getenv("YONDER_SOURCE_DIR");
  std::string artifacts = std::string(std::getenv("YONDER_BUILD_DIR")) + "/Testing/artifacts/dashboard";
  auto r = run({"/usr/bin/env", "python3", src + "/tests/integration/dashboard_browser_check.py",
                program_path("yonder"), "studio", kTestImage, artifacts},
               laptop.env());
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
}

}  // namespace
}  // namespace yonder::testing
