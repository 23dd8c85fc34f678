// The web dashboard in a real browser: a provider ("studio") and a laptop
// daemon paired over loopback both ways, and headless Chromium driven over
// WebDriver by dashboard_browser_check.py (standard-library Python,
// chromedriver). The laptop samples its history every second, so the charts
// fill within the test; it uses the studio's GPUs and also runs one job for
// the studio, whose use the jobs page charts. Before the laptop grants the
// studio anything, the studio makes one call that the laptop refuses, so
// the audit page has a refusal to mark. The script's checks are listed in
// its docstring; screenshots go to Testing/artifacts/dashboard/ in the build
// folder.
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

TEST(DashboardBrowser, ChartsTabsAndActionsThroughThePage) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  if (!browser_installed()) {
    // CI (YONDER_REQUIRE_DOCKER=1) installs everything in scripts/packages.txt.
    if (docker_required()) FAIL() << "chromium and chromium-driver are missing; run scripts/setup.sh";
    GTEST_SKIP() << "chromium and chromium-driver are missing; run scripts/setup.sh";
  }
  TempDir dir;
  Node studio(dir, "studio", true);
  // The laptop runs jobs for the studio too: the test image, small limits.
  Node laptop(dir, "laptop", false, {{"YONDER_IMAGE_ALLOWLIST", "yonder-test/*"}, {"YONDER_PULL_POLICY", "never"}},
              "[history]\ninterval_s = 1\n"
              "[jobs]\ndefault_memory_mib = 64\ndefault_disk_mib = 16\nshm_mib = 8\npids_limit = 64\nstop_grace_s = 1\n");
  laptop.pair_with(studio, {"--max-jobs", "4"});
  // The studio may do nothing on the laptop yet: refused, and audited there.
  auto refused = studio.yonder({"call", "laptop", "run.list"});
  EXPECT_NE(refused.exit_code, 0) << "the laptop should have refused run.list: " << refused.out;
  // Already pinned there with nothing: this link replaces that scope.
  studio.pair_with(laptop, {"--max-jobs", "2", "--replace-scope"});
  auto job = studio.yonder({"run", "-d", "--no-upload", "--on", "laptop", "--image", kTestImage, "--", "sh", "-c",
                            "while true; do sleep 1; done"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  std::string provider_job = job.out.substr(0, job.out.find_last_not_of(" \n") + 1);
  std::string src = std::getenv("YONDER_SOURCE_DIR");
  std::string artifacts = std::string(std::getenv("YONDER_BUILD_DIR")) + "/Testing/artifacts/dashboard";
  auto r = run({"/usr/bin/env", "python3", src + "/tests/integration/dashboard_browser_check.py",
                program_path("yonder"), "studio", kTestImage, artifacts, provider_job},
               laptop.env());
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
}

}  // namespace
}  // namespace yonder::testing
