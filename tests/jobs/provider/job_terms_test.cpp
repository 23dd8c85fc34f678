#include "jobs/provider/job_terms.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crypto/scope.h"

namespace yonder::jobs::provider {
namespace {

using nlohmann::json;
using protocol::parse_job_request;

TEST(JobTerms, WorkdirIsUnderTheWorkspaceAndTtyIsCarried) {
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

TEST(JobTerms, ResolveAppliesDefaultsAndNamesTheCeiling) {
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

TEST(JobTerms, AShareIsItsVramOrItsFractionCappedAndNoWholeGpu) {
  auto vram = parse_job_request({{"image", "python"}, {"share_vram_mib", 8192}});
  ASSERT_TRUE(vram.ok()) << vram.error().to_string();
  auto resolved = resolve(*vram, ProviderLimits{});
  ASSERT_TRUE(resolved.ok());
  ASSERT_TRUE(resolved->share);
  EXPECT_EQ(resolved->share->vram_bytes, 8ULL << 30);
  EXPECT_EQ(resolved->gpus, 0);
  EXPECT_EQ(resolved->vram_bytes, 0u);  // the whole-GPU limit does not apply
  auto half = parse_job_request({{"image", "python"}, {"share_permille", 500}, {"vram_mib", 12288}});
  ASSERT_TRUE(half.ok()) << half.error().to_string();
  resolved = resolve(*half, ProviderLimits{});
  ASSERT_TRUE(resolved.ok() && resolved->share);
  EXPECT_EQ(resolved->share->permille, 500u);
  EXPECT_EQ(resolved->share->max_bytes, 12ULL << 30);
  EXPECT_EQ(share_bytes(*resolved->share, GpuSlot{"GPU-a", "x", 80ULL << 30}), 12ULL << 30);  // capped
  EXPECT_EQ(share_bytes(*resolved->share, GpuSlot{"GPU-b", "x", 16ULL << 30}), 8ULL << 30);   // half
  auto whole = parse_job_request({{"image", "python"}, {"gpus", 1}, {"vram_mib", 8192}});
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(resolve(*whole, ProviderLimits{})->share);
  EXPECT_TRUE(job_terms(*half, *resolve(*half, ProviderLimits{}), true, "").simulate_gpus);
}

// `yonder share --vram 12G`: the scope caps a peer's share as it caps a
// whole GPU's limit; a fraction gets the cap as its own.
TEST(JobTerms, TheScopesVramCapHoldsSharesToo) {
  Scope scope;
  scope.vram_bytes = 12ULL << 30;
  auto half = *parse_job_request({{"image", "python"}, {"share_permille", 500}});
  ASSERT_TRUE(apply_scope(half, scope, ProviderLimits{}).ok());
  EXPECT_EQ(half.vram_mib, 12288);
  EXPECT_EQ(share_request(half)->max_bytes, 12ULL << 30);
  auto small = *parse_job_request({{"image", "python"}, {"share_vram_mib", 8192}});
  EXPECT_TRUE(apply_scope(small, scope, ProviderLimits{}).ok());
  auto big = *parse_job_request({{"image", "python"}, {"share_vram_mib", 16384}});
  auto refused = apply_scope(big, scope, ProviderLimits{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("your scope on this provider allows at most 12"), std::string::npos)
      << refused.error().message();
  EXPECT_NE(refused.error().message().find("yonder scope PEER --vram SIZE"), std::string::npos);
  auto over_cap = *parse_job_request({{"image", "python"}, {"share_permille", 500}, {"vram_mib", 16384}});
  EXPECT_FALSE(apply_scope(over_cap, scope, ProviderLimits{}).ok());
}

TEST(JobTerms, DevShmIsHalfTheMemoryByDefaultAndNeverMore) {
  ProviderLimits limits;
  JobRequest r;
  r.image = "python";
  r.memory_mib = 4096;
  EXPECT_EQ(resolve(r, limits)->task.limits.shm_bytes, 2048LL << 20);  // jobs.shm_mib = 0: half
  limits.shm_mib = 256;                                                  // the provider's own default
  EXPECT_EQ(resolve(r, limits)->task.limits.shm_bytes, 256LL << 20);
  limits.shm_mib = 1 << 20;  // a default past the cap is capped, not refused
  EXPECT_EQ(resolve(r, limits)->task.limits.shm_bytes, 2048LL << 20);
  r.shm_mib = 1024;  // the job's own, whatever the default
  EXPECT_EQ(resolve(r, limits)->task.limits.shm_bytes, 1024LL << 20);
  r.shm_mib = 2049;
  auto over = resolve(r, limits);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(over.error().message().find("at most half its memory (2048 MiB of 4096)"), std::string::npos)
      << over.error().message();
  EXPECT_NE(over.error().message().find("--shm-size"), std::string::npos);
  r.shm_mib = 0;
  r.memory_mib = 16;  // the least a job may have
  EXPECT_EQ(resolve(r, ProviderLimits{})->task.limits.shm_bytes, 8LL << 20);
}

TEST(JobTerms, WhatTheStoreKeepsReadsBackAsItWasAccepted) {
  JobRequest r;
  r.image = "python";
  r.gpus = 1;
  r.vram_mib = 1024;
  r.disk_mib = 64;
  r.wall_time_s = 120;
  auto resolved = resolve(r, ProviderLimits{});
  ASSERT_TRUE(resolved.ok());
  JobTerms t = job_terms(r, *resolved, true, "/var/lib/yonder/uploads/u1");
  EXPECT_EQ(t.wall_time_s, 120);
  EXPECT_EQ(t.vram_bytes, 1024ULL << 20);
  EXPECT_EQ(t.disk_bytes, 64ULL << 20);
  EXPECT_TRUE(t.simulate_gpus);
  t.max_running = 2;  // the scope's jobs at once when it was submitted
  // Stored as text, read back: the same terms.
  auto back = terms_from_json(json::parse(terms_to_json(t).dump()));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(terms_to_json(*back), terms_to_json(t));
  EXPECT_EQ(back->workspace_seed, t.workspace_seed);
  EXPECT_EQ(back->max_running, 2);
  // A CPU job never claims fake GPUs, whatever gpu.simulate says.
  r.gpus = 0;
  EXPECT_FALSE(job_terms(r, *resolve(r, ProviderLimits{}), true, "").simulate_gpus);
}

TEST(JobTerms, AnOlderRowReadsWithZerosTheJobManagerTakesAsItsDefaults) {
  auto older = terms_from_json({{"request", {{"image", "python"}}}, {"gpus", 0}});
  ASSERT_TRUE(older.ok()) << older.error().to_string();
  EXPECT_EQ(older->wall_time_s, 0);
  EXPECT_EQ(older->disk_bytes, 0u);
  EXPECT_EQ(older->request.image, "python");
}

TEST(JobTerms, DamagedTermsAreDataLossNamingWhat) {
  for (const auto& [j, says] : std::vector<std::pair<json, std::string>>{
           {json::array(), "not an object"},
           {{{"gpus", 1}}, "no request"},
           {{{"request", {{"image", "python"}, {"colour", "red"}}}}, "colour"},
           {{{"request", {{"image", "python"}}}, {"wall_time_s", -5}}, "negative"},
           {{{"request", {{"image", "python"}}}, {"vram_bytes", "lots"}}, "vram_bytes"},
           {{{"request", {{"image", "python"}}}, {"simulate_gpus", 1}}, "simulate_gpus"}}) {
    auto t = terms_from_json(j);
    ASSERT_FALSE(t.ok()) << j.dump();
    EXPECT_EQ(t.error().code(), ErrorCode::kDataLoss) << j.dump();
    EXPECT_NE(t.error().message().find(says), std::string::npos) << t.error().message();
  }
}

}  // namespace
}  // namespace yonder::jobs::provider
