// clients/python/yonder_client.py against live daemons (issue 8): a provider
// and a consumer, paired over loopback; python3 drives the consumer's TCP
// API (python_client_check.py): over the unix socket by default and TCP given
// a URL; status, peers, a run with streamed logs and its exit code, ps, stop,
// metrics, share, forward, and the README's example as written (exec, cp
// both ways, stats); then `pip install` of the package, offline.
#include <gtest/gtest.h>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

TEST(PythonClient, RunsStreamsListsAndStopsJobs) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4", "--scope", "run,exec,forward,files"});
  std::string src = std::getenv("YONDER_SOURCE_DIR");
  auto r = run({"/usr/bin/env", "python3", src + "/tests/integration/python_client_check.py", src + "/clients/python",
                "studio", kTestImage},
               laptop.env());
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
}

}  // namespace
}  // namespace yonder::testing
