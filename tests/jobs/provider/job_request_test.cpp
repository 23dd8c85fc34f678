#include "jobs/provider/job_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace yonder::jobs::provider {
namespace {

using nlohmann::json;

TEST(JobRequest, ParsesAFullRequest) {
  auto r = parse_job_request(json::parse(R"({"image":"python:3","command":["python","x.py"],"env":{"A":"1"},
    "gpus":2,"vram_mib":8000,"cpus":1.5,"memory_mib":4096,"disk_mib":2048,"wall_time_s":60,"isolation":"gvisor","network":"none"})"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->gpus, 2);
  EXPECT_EQ(r->vram_mib, 8000);
  EXPECT_EQ(r->isolation, exec::Isolation::kGvisor);
  auto again = parse_job_request(r->to_json());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->to_json(), r->to_json());
}

TEST(JobRequest, RefusesWithTheFieldNamed) {
  struct Case {
    const char* body;
    const char* says;
  };
  for (auto c : {Case{R"({})", "'image'"}, Case{R"({"image":"python","gpu":1})", "'gpu' is not a known field"},
                 Case{R"({"image":"python","gpus":-1})", "'gpus'"}, Case{R"({"image":"python","gpus":1.5})", "'gpus'"},
                 Case{R"({"image":"python","command":"ls"})", "'command'"},
                 Case{R"({"image":"python","env":{"NVIDIA_VISIBLE_DEVICES":"all"}})", "NVIDIA_VISIBLE_DEVICES"},
                 Case{R"({"image":"python","isolation":"vm"})", "'isolation'"},
                 Case{R"({"image":"python","cpus":"2"})", "'cpus'"}, Case{R"({"image":"UPPER"})", "image reference"},
                 Case{R"({"image":"python","memory_mib":99999999999999999999})", "'memory_mib'"},
                 Case{R"({"image":"python","workdir":"../etc"})", "'workdir' must not contain \"..\""},
                 Case{R"({"image":"python","workdir":"a/../../x"})", "'workdir' must not contain"},
                 Case{R"({"image":"python","workdir":"/etc"})", "'workdir' must be relative to the workspace"},
                 Case{R"({"image":"python","workdir":"/workspacex/a"})", "'workdir' must be relative"},
                 Case{R"({"image":"python","workdir":"a\u0000b"})", "'workdir' has a NUL"},
                 Case{R"({"image":"python","workdir":7})", "'workdir' must be a string"},
                 Case{R"({"image":"python","tty":"yes"})", "'tty'"}}) {
    auto r = parse_job_request(json::parse(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.error().to_string().find(c.says), std::string::npos) << c.body << " -> " << r.error().to_string();
  }
}

TEST(JobRequest, WorkdirIsUnderTheWorkspaceAndTtyIsCarried) {
  struct Case {
    const char* workdir;
    const char* in_job;
  };
  for (auto c : {Case{"", "/workspace"}, Case{".", "/workspace"}, Case{"src/app", "/workspace/src/app"},
                 Case{"./src//app/", "/workspace/src/app"}, Case{"/workspace", "/workspace"},
                 Case{"/workspace/out", "/workspace/out"}, Case{"//workspace/./a", "/workspace/a"}}) {
    auto r = parse_job_request({{"image", "python"}, {"workdir", c.workdir}, {"tty", true}});
    ASSERT_TRUE(r.ok()) << c.workdir << ": " << r.error().to_string();
    auto resolved = resolve(*r, ProviderLimits{});
    ASSERT_TRUE(resolved.ok());
    EXPECT_EQ(resolved->task.workdir, c.in_job) << c.workdir;
    EXPECT_TRUE(resolved->task.tty);
    auto again = parse_job_request(r->to_json());  // what the provider stores
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->workdir, c.workdir);
  }
  auto plain = parse_job_request({{"image", "python"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(resolve(*plain, ProviderLimits{})->task.workdir, "/workspace");
  EXPECT_FALSE(resolve(*plain, ProviderLimits{})->task.tty);
  EXPECT_FALSE(parse_job_request({{"image", "python"}, {"workdir", std::string(1025, 'a')}}).ok());
}

TEST(JobRequest, ResolveAppliesDefaultsAndNamesTheCeiling) {
  ProviderLimits limits;
  JobRequest r;
  r.image = "python";
  auto ok = resolve(r, limits);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->task.limits.memory_bytes, 2048LL << 20);
  EXPECT_EQ(ok->task.limits.tmp_bytes, 256LL << 20);  // min(256 MiB, memory / 4)
  EXPECT_EQ(ok->task.limits.nano_cpus, 1'000'000'000);
  EXPECT_EQ(ok->wall_time.count(), 3600);
  r.memory_mib = 64;
  EXPECT_EQ(resolve(r, limits)->task.limits.tmp_bytes, 16LL << 20);
  r.memory_mib = 1 << 20;
  auto big = resolve(r, limits);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("jobs.max_memory_mib"), std::string::npos);
  r.memory_mib = 0;
  r.egress = true;
  auto egress = resolve(r, limits);
  ASSERT_FALSE(egress.ok());
  EXPECT_NE(egress.error().message().find("executor.allow_egress"), std::string::npos);
  r.egress = false;
  r.wall_time_s = 999999;
  EXPECT_NE(resolve(r, limits).error().message().find("jobs.max_wall_time_s"), std::string::npos);
}

}  // namespace
}  // namespace yonder::jobs::provider
