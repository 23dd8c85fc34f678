#include "jobs/protocol/job_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace yonder::jobs::protocol {
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

TEST(JobRequest, EveryFieldSurvivesItsOwnEncoding) {
  JobRequest r;
  r.image = "python:3.11";
  r.command = {"python", "-c", "print(1)"};
  r.env = {{"A", "1"}, {"B", "two"}};
  r.gpus = 2;
  r.vram_mib = 8192;
  r.cpus = 1.5;
  r.memory_mib = 4096;
  r.disk_mib = 2048;
  r.wall_time_s = 600;
  r.isolation = exec::Isolation::kGvisor;
  r.egress = true;
  r.workdir = "src/app";
  r.tty = true;
  r.shm_mib = 1024;
  auto again = parse_job_request(r.to_json());
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->to_json(), r.to_json());
  EXPECT_EQ(again->image, r.image);
  EXPECT_EQ(again->env, r.env);
  EXPECT_EQ(again->isolation, exec::Isolation::kGvisor);
  EXPECT_TRUE(again->egress);
  EXPECT_EQ(again->shm_mib, 1024);
  EXPECT_FALSE(JobRequest{}.to_json().contains("shm_mib"));  // unset: the provider's default, not sent
  EXPECT_FALSE(parse_job_request({{"image", "x"}, {"shm_mib", -1}}).ok());
  EXPECT_FALSE(parse_job_request({{"image", "x"}, {"shm_mib", "1G"}}).ok());
}

TEST(JobRequest, AShareOfAGpuIsVramOrAFractionNeverBothNorWithWholeGpus) {
  JobRequest r;
  r.image = "python";
  r.share_vram_mib = 8192;
  auto again = parse_job_request(r.to_json());
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->share_vram_mib, 8192);
  EXPECT_TRUE(again->share());
  r.share_vram_mib = 0;
  r.share_permille = 500;
  again = parse_job_request(r.to_json());
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->share_permille, 500);
  r.vram_mib = 12288;  // a fraction with a cap
  EXPECT_TRUE(parse_job_request(r.to_json()).ok());
  // Unset, neither is sent: an older provider never sees them.
  EXPECT_FALSE(JobRequest{}.to_json().contains("share_permille"));
  EXPECT_FALSE(JobRequest{}.to_json().contains("share_vram_mib"));
  EXPECT_FALSE(JobRequest{}.share());
  struct Case {
    const char* body;
    const char* says;
  };
  for (auto c : {Case{R"({"image":"x","share_vram_mib":8,"share_permille":500})", "give one"},
                 Case{R"({"image":"x","share_permille":500,"gpus":1})", "must be 0 for a share"},
                 Case{R"({"image":"x","share_vram_mib":8,"vram_mib":8})", "not with 'share_vram_mib'"},
                 Case{R"({"image":"x","share_permille":1000})", "'share_permille'"},
                 Case{R"({"image":"x","share_permille":-5})", "'share_permille'"},
                 Case{R"({"image":"x","share_vram_mib":0.5})", "'share_vram_mib'"}}) {
    auto bad = parse_job_request(json::parse(c.body));
    ASSERT_FALSE(bad.ok()) << c.body;
    EXPECT_NE(bad.error().to_string().find(c.says), std::string::npos) << c.body << " -> " << bad.error().to_string();
  }
}

}  // namespace
}  // namespace yonder::jobs::protocol
