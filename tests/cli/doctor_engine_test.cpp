// `yonder doctor`'s judgement of the container engine (engine_checks, a pure
// function of what was probed): it names the engine it found and tells the
// truth about what that engine can do for GPU and gVisor jobs.
#include <gtest/gtest.h>

#include <map>

#include "cli/doctor.h"

namespace yonder::cli {
namespace {

std::map<std::string, CheckResult> by_name(const std::vector<CheckResult>& checks) {
  std::map<std::string, CheckResult> m;
  for (const auto& c : checks) m[c.name] = c;
  return m;
}

EngineFacts podman_facts() {
  EngineFacts f;
  f.socket = "/run/podman/podman.sock";
  f.reachable = true;
  f.answered_like_docker = true;
  f.podman = true;
  f.version = "4.3.1";
  f.api_version = "1.41";
  f.runtimes = {"crun", "runc", "runsc", "kata"};  // Podman lists its configuration, installed or not
  f.runsc_path = "/usr/bin/runsc";
  f.podman_init_path = "/usr/libexec/podman/catatonit";
  return f;
}

TEST(DoctorEngine, NamesPodmanAndRefusesToPassItsGpuAndGvisorSupport) {
  auto checks = engine_checks(podman_facts());
  auto m = by_name(checks);
  EXPECT_EQ(m["docker engine"].state, CheckState::kPass);
  EXPECT_EQ(m["docker engine"].summary.rfind("Podman 4.3.1 (API 1.41)", 0), 0u) << m["docker engine"].summary;
  EXPECT_EQ(m["docker engine"].summary.find("Docker"), std::string::npos) << m["docker engine"].summary;
  EXPECT_EQ(m["podman init (catatonit)"].state, CheckState::kPass);
  EXPECT_EQ(m["nvidia container runtime"].state, CheckState::kFail);
  EXPECT_NE(m["nvidia container runtime"].summary.find("Podman"), std::string::npos);
  // runsc is installed and Podman lists it, but a gVisor job would run on
  // the host kernel: not a pass.
  EXPECT_EQ(m["gvisor (runsc, optional)"].state, CheckState::kWarn);
  EXPECT_NE(m["gvisor (runsc, optional)"].summary.find("refused"), std::string::npos);
  EXPECT_FALSE(m["gvisor (runsc, optional)"].fix.empty());
  EXPECT_EQ(checks.back().name, "gvisor (runsc, optional)");  // run_doctor_checks puts NVML before it
}

TEST(DoctorEngine, PodmanWithoutCatatonitFailsNamingThePackage) {
  EngineFacts f = podman_facts();
  f.podman_init_path.clear();
  auto m = by_name(engine_checks(f));
  EXPECT_EQ(m["podman init (catatonit)"].state, CheckState::kFail);
  EXPECT_EQ(m["podman init (catatonit)"].fix, "apt-get install catatonit");
}

TEST(DoctorEngine, DockerKeepsItsOwnChecksAndNeverAsksForCatatonit) {
  EngineFacts f;
  f.socket = "/var/run/docker.sock";
  f.reachable = true;
  f.answered_like_docker = true;
  f.version = "20.10.24";
  f.api_version = "1.41";
  f.runtimes = {"runc", "runsc"};
  f.runsc_path = "/usr/bin/runsc";
  auto m = by_name(engine_checks(f));
  EXPECT_EQ(m["docker engine"].summary, "Docker 20.10.24 (API 1.41) at /var/run/docker.sock");
  EXPECT_EQ(m.count("podman init (catatonit)"), 0u);
  EXPECT_EQ(m["gvisor (runsc, optional)"].state, CheckState::kPass);
  EXPECT_EQ(m["nvidia container runtime"].state, CheckState::kFail);
  EXPECT_NE(m["nvidia container runtime"].fix.find("nvidia-container-toolkit"), std::string::npos);
  f.runtimes.push_back("nvidia");
  EXPECT_EQ(by_name(engine_checks(f))["nvidia container runtime"].state, CheckState::kPass);
}

TEST(DoctorEngine, AnUnreachableEngineFailsWithTheFix) {
  EngineFacts f;
  f.socket = "/var/run/docker.sock";
  f.error = "connection refused";
  auto m = by_name(engine_checks(f));
  EXPECT_EQ(m["docker engine"].state, CheckState::kFail);
  EXPECT_NE(m["docker engine"].fix.find("docker.io"), std::string::npos);
  EXPECT_EQ(m["nvidia container runtime"].state, CheckState::kFail);
  EXPECT_NE(m["gvisor (runsc, optional)"].state, CheckState::kFail);  // optional: never a failure
}

}  // namespace
}  // namespace yonder::cli
