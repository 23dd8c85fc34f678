// `yonder doctor` against the real environment: the real Docker engine when
// the test run started one (YONDER_REQUIRE_DOCKER=1), a socket path with
// nothing behind it otherwise, and no NVIDIA driver on this machine.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

// `yonder doctor --json`'s checks, by name.
nlohmann::json checks_by_name(const RunResult& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out << r.err;
  nlohmann::json by_name = nlohmann::json::object();
  for (const auto& c : j["checks"]) by_name[c["check"].get<std::string>()] = c;
  return by_name;
}

class Doctor : public ::testing::Test {
 protected:
  Doctor() {
    env_ = {{"YONDER_HOME", dir_ / "home"},
            {"YONDER_CONFIG", ""},
            {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
            {"YONDER_GPU_INVENTORY", "nvml:/nonexistent/libnvidia-ml.so.1"},
            {"YONDER_DOCKER_SOCKET", dir_ / "no-docker.sock"}};
    auto r = run({program_path("yonder"), "init"}, env_);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  nlohmann::json doctor_json(const Env& extra = {}) {
    Env env = env_;
    for (const auto& [k, v] : extra) env[k] = v;
    auto r = run({program_path("yonder"), "doctor", "--json"}, env);
    last_exit_ = r.exit_code;
    return checks_by_name(r);
  }
  TempDir dir_;
  Env env_;
  int last_exit_ = -1;
};

TEST_F(Doctor, ReportsEachCheckWithAFix) {
  auto checks = doctor_json();
  EXPECT_EQ(last_exit_, 1);
  EXPECT_EQ(checks["identity key"]["state"], "pass");
  EXPECT_EQ(checks["local API"]["state"], "fail");
  EXPECT_NE(checks["local API"]["fix"].get<std::string>().find("yonderd"), std::string::npos);
  EXPECT_EQ(checks["docker engine"]["state"], "fail");
  EXPECT_NE(checks["docker engine"]["fix"].get<std::string>().find("docker.io"), std::string::npos);
  EXPECT_EQ(checks["nvidia driver (NVML)"]["state"], "fail");
  EXPECT_NE(checks["nvidia driver (NVML)"]["summary"].get<std::string>().find("no_library"), std::string::npos);
  EXPECT_FALSE(checks["nvidia driver (NVML)"]["fix"].get<std::string>().empty());
  EXPECT_EQ(checks["nvidia container runtime"]["state"], "fail");
  // runsc is optional: never a failure.
  EXPECT_NE(checks["gvisor (runsc, optional)"]["state"], "fail");
}

TEST_F(Doctor, PassesTheDaemonAndKeyChecksWhenHealthy) {
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  auto checks = doctor_json();
  EXPECT_EQ(checks["local API"]["state"], "pass");
  EXPECT_EQ(checks["identity key"]["state"], "pass");
}

TEST_F(Doctor, FlagsAKeyReadableByOthers) {
  std::string key = dir_ / "home/identity.key";
  ASSERT_EQ(::chmod(key.c_str(), 0640), 0);
  auto checks = doctor_json();
  EXPECT_EQ(checks["identity key"]["state"], "fail");
  EXPECT_EQ(checks["identity key"]["fix"], "chmod 600 " + key);
}

TEST_F(Doctor, RealDockerEngine) {
  const char* require = std::getenv("YONDER_REQUIRE_DOCKER");
  if (require == nullptr || std::string(require) != "1") {
    GTEST_SKIP() << "no Docker engine started for this run (scripts/test.sh starts one and sets YONDER_REQUIRE_DOCKER=1)";
  }
  auto checks = doctor_json({{"YONDER_DOCKER_SOCKET", "/var/run/docker.sock"}});
  EXPECT_EQ(checks["docker engine"]["state"], "pass") << checks["docker engine"];
  EXPECT_NE(checks["docker engine"]["summary"].get<std::string>().find("API 1."), std::string::npos);
  // No NVIDIA runtime on this machine: a failure with the toolkit as the fix.
  EXPECT_EQ(checks["nvidia container runtime"]["state"], "fail");
  EXPECT_NE(checks["nvidia container runtime"]["fix"].get<std::string>().find("nvidia-ctk"), std::string::npos);
}

TEST_F(Doctor, ExplainsTheWslBlockedMessage) {
  // nvidia-smi cannot exist on this machine; a stand-in prints what WSL's does.
  std::string bin = dir_ / "bin";
  ::mkdir(bin.c_str(), 0700);
  std::string smi = bin + "/nvidia-smi";
  {
    std::ofstream f(smi);
    f << "#!/bin/sh\necho 'Failed to initialize NVML: GPU access blocked by the operating system'\nexit 9\n";
  }
  ASSERT_EQ(::chmod(smi.c_str(), 0700), 0);
  const char* path = std::getenv("PATH");
  auto checks = doctor_json({{"PATH", bin + ":" + (path ? path : "/usr/bin:/bin")}});
  auto nvml = checks["nvidia driver (NVML)"];
  EXPECT_EQ(nvml["state"], "fail");
  EXPECT_NE(nvml["summary"].get<std::string>().find("blocked by the operating system"), std::string::npos);
  EXPECT_NE(nvml["fix"].get<std::string>().find("wsl --update"), std::string::npos) << nvml;
}

TEST_F(Doctor, HumanOutputHasAFixLinePerFailure) {
  auto r = run({program_path("yonder"), "doctor"}, env_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("[FAIL] docker engine"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fix: "), std::string::npos);
  EXPECT_NE(r.out.find("check(s) failed"), std::string::npos);
}

// A node that only uses a provider: its own engine and GPU checks are not
// failures (it needs none), and its provider is checked instead, with the
// path it took; a provider that is down fails with what to do.
TEST(DoctorRoles, AConsumerOnlyNodeSkipsTheGpuChecksAndChecksItsProvider) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run"});
  auto doctor = [&](int& exit_code) {
    auto r = laptop.yonder({"doctor", "--json"});
    exit_code = r.exit_code;
    return checks_by_name(r);
  };
  int code = -1;
  auto checks = doctor(code);
  EXPECT_EQ(code, 0) << checks.dump(2);
  EXPECT_EQ(checks["role"]["summary"], "consumer");
  for (const char* gpu_side : {"docker engine", "nvidia container runtime", "nvidia driver (NVML)"}) {
    EXPECT_EQ(checks[gpu_side]["state"], "skip") << gpu_side << ": " << checks[gpu_side];
    EXPECT_NE(checks[gpu_side]["summary"].get<std::string>().find("only uses other nodes' GPUs"), std::string::npos);
  }
  EXPECT_EQ(checks["peer studio"]["state"], "pass") << checks["peer studio"];
  EXPECT_NE(checks["peer studio"]["summary"].get<std::string>().find("reachable, direct"), std::string::npos)
      << checks["peer studio"];
  // The provider: it shares, so its GPU checks stay.
  auto p = studio.yonder({"doctor", "--json"});
  auto provider = nlohmann::json::parse(p.out, nullptr, false);
  ASSERT_TRUE(provider.is_object()) << p.out;
  for (const auto& c : provider["checks"]) {
    EXPECT_NE(c["state"], "skip") << c;
    if (c["check"] == "role") {
      EXPECT_EQ(c["summary"], "provider");
    }
  }
  studio.crash_and_restart([&] {
    auto down = doctor(code);
    EXPECT_EQ(code, 1);
    EXPECT_EQ(down["peer studio"]["state"], "fail") << down["peer studio"];
    EXPECT_NE(down["peer studio"]["fix"].get<std::string>().find("yonder peers studio"), std::string::npos);
  });
}

}  // namespace
}  // namespace yonder::testing
