// The disk the provider promises and the workspaces it takes back
// (disk_budget.h): pure decisions, with properties over random volumes.
#include "jobs/provider/disk_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace yonder::jobs::provider {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;

TEST(DiskBudget, TheReserveIsTheSmallerOfItsTwoSettings) {
  EXPECT_EQ(disk_reserve(100 * kGiB, 2 * kGiB, 5), 2 * kGiB);
  EXPECT_EQ(disk_reserve(10 * kGiB, 2 * kGiB, 5), 512 * kMiB);
  EXPECT_EQ(disk_reserve(10 * kGiB, 2 * kGiB, 0), 0u);
}

TEST(DiskBudget, AJobBeyondFreeSpaceMinusTheReserveCanNeverStart) {
  DiskSnapshot s{.free_bytes = 64 * kGiB, .reserve_bytes = 2 * kGiB, .allocated_by_live = 0, .promised_unallocated = 0};
  auto d = decide_disk(100 * kGiB, s);
  EXPECT_EQ(d.fit, Fit::kNever);
  EXPECT_NE(d.reason.find("64.0 GiB free"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("ask for at most 62.0 GiB with --disk"), std::string::npos) << d.reason;
  EXPECT_EQ(decide_disk(62 * kGiB, s).fit, Fit::kNow);
  EXPECT_EQ(decide_disk(62 * kGiB + 1, s).fit, Fit::kNever);
}

TEST(DiskBudget, SpaceHeldByRunningJobsMakesAJobWaitNotFail) {
  // 10 GiB free, 20 GiB allocated to running jobs, 1 GiB reserve.
  DiskSnapshot s{.free_bytes = 10 * kGiB, .reserve_bytes = kGiB, .allocated_by_live = 20 * kGiB, .promised_unallocated = 0};
  EXPECT_EQ(decide_disk(9 * kGiB, s).fit, Fit::kNow);
  auto later = decide_disk(12 * kGiB, s);
  EXPECT_EQ(later.fit, Fit::kLater);
  EXPECT_EQ(later.reason.rfind("disk:", 0), 0u) << later.reason;
  EXPECT_EQ(decide_disk(30 * kGiB, s).fit, Fit::kNever);
  // A job that was just started holds its promise before its image exists.
  s.promised_unallocated = 5 * kGiB;
  EXPECT_EQ(decide_disk(9 * kGiB, s).fit, Fit::kLater);
  EXPECT_EQ(decide_disk(4 * kGiB, s).fit, Fit::kNow);
  // Ended jobs' workspaces come back after their retention: wait for them.
  s.allocated_by_ended = 15 * kGiB;
  EXPECT_EQ(decide_disk(40 * kGiB, s).fit, Fit::kLater);
  EXPECT_EQ(decide_disk(45 * kGiB, s).fit, Fit::kNever);
}

// Property: whatever the volume, the jobs started one after another while
// decide_disk says kNow never promise more than free space minus reserve.
TEST(DiskBudget, PromisesNeverExceedFreeSpaceMinusTheReserve) {
  std::mt19937_64 rng(20261203);
  for (int round = 0; round < 2000; ++round) {
    uint64_t free = rng() % (100 * kGiB);
    DiskSnapshot s{.free_bytes = free, .reserve_bytes = rng() % (4 * kGiB), .allocated_by_live = 0,
                   .promised_unallocated = 0};
    uint64_t promised = 0;
    for (int j = 0; j < 20; ++j) {
      uint64_t ask = (rng() % (20 * kGiB)) + 8 * kMiB;
      if (decide_disk(ask, s).fit == Fit::kNow) {
        promised += ask;
        s.promised_unallocated += ask;
      }
    }
    uint64_t room = free > s.reserve_bytes ? free - s.reserve_bytes : 0;
    ASSERT_LE(promised, room) << "round " << round;
  }
}

TEST(DiskBudget, WorkspacesGoAfterTheirRetention) {
  std::vector<EndedWorkspace> ended = {{"old", 1000, kGiB, false}, {"new", 1900, kGiB, false}};
  EXPECT_EQ(workspaces_to_remove(ended, 1999, 1000, 0), std::vector<std::string>{});
  EXPECT_EQ(workspaces_to_remove(ended, 2000, 1000, 0), std::vector<std::string>{"old"});
  EXPECT_EQ(workspaces_to_remove(ended, 3000, 1000, 0), (std::vector<std::string>{"old", "new"}));
  EXPECT_EQ(next_workspace_expiry(ended, 1000), 2000);
  EXPECT_EQ(next_workspace_expiry({}, 1000), 0);
}

TEST(DiskBudget, PastTheCapTheOldestFetchedGoFirstAndUnfetchedStay) {
  std::vector<EndedWorkspace> ended = {{"c", 300, 4 * kGiB, true},
                                       {"a", 100, 4 * kGiB, false},
                                       {"b", 200, 4 * kGiB, true},
                                       {"d", 400, 4 * kGiB, true}};
  // 16 GiB held, 9 GiB allowed: b then c go (a was never fetched).
  EXPECT_EQ(workspaces_to_remove(ended, 500, 86400, 9 * kGiB), (std::vector<std::string>{"b", "c"}));
  // Under the cap, nothing goes before its retention.
  EXPECT_TRUE(workspaces_to_remove(ended, 500, 86400, 16 * kGiB).empty());
  // Nothing fetched: the cap waits for the retention.
  for (auto& w : ended) w.fetched = false;
  EXPECT_TRUE(workspaces_to_remove(ended, 500, 86400, kGiB).empty());
}

}  // namespace
}  // namespace yonder::jobs::provider
