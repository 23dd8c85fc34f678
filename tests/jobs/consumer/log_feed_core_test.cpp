// The consumer's store of a job's pushed log (jobs/consumer/log_feed_core.h):
// which polls it answers, which wait and which go back to run.logs; what a
// hostile provider's pushes do to it; that what it keeps stays bounded.
#include "jobs/consumer/log_feed_core.h"

#include <gtest/gtest.h>

#include <random>

namespace yonder::jobs::consumer {
namespace {

using json = nlohmann::json;
using Verdict = LogFeedCore::Verdict;

// A run.logs reply covering [from, to) with one record.
json reply(uint64_t from, uint64_t to, bool ended = false) {
  json records = json::array();
  if (to > from) records.push_back({{"stream", "stdout"}, {"t", 1}, {"data", std::to_string(from)}});
  return {{"records", records}, {"next_offset", to}, {"ended", ended}};
}

TEST(LogFeedCore, PollsAtPushedBoundariesAreAnsweredAndTheEndWaits) {
  LogFeedCore core(100, 1 << 20);
  EXPECT_EQ(core.poll(100).verdict, Verdict::kWait);
  ASSERT_TRUE(core.push(reply(100, 150), 64));
  ASSERT_TRUE(core.push(reply(150, 180), 64));
  auto first = core.poll(100);
  ASSERT_EQ(first.verdict, Verdict::kAnswer);
  EXPECT_EQ(first.reply["next_offset"], 150);
  EXPECT_EQ(core.poll(150).reply["next_offset"], 180);
  EXPECT_EQ(core.poll(180).verdict, Verdict::kWait);
  // Inside a reply, behind the feed's start, ahead of its end: run.logs answers.
  EXPECT_EQ(core.poll(120).verdict, Verdict::kElsewhere);
  EXPECT_EQ(core.poll(50).verdict, Verdict::kElsewhere);
  EXPECT_EQ(core.poll(500).verdict, Verdict::kElsewhere);
}

TEST(LogFeedCore, TheJobsEndAnswersAtTheEndInsteadOfWaiting) {
  LogFeedCore core(0, 1 << 20);
  ASSERT_TRUE(core.push(reply(0, 10), 64));
  ASSERT_TRUE(core.push(reply(10, 10, true), 32));  // nothing more, and the end
  EXPECT_TRUE(core.ended());
  auto end = core.poll(10);
  ASSERT_EQ(end.verdict, Verdict::kAnswer);
  EXPECT_TRUE(end.reply["ended"].get<bool>());
  EXPECT_TRUE(end.reply["records"].empty());
  EXPECT_FALSE(core.push(reply(10, 20), 64)) << "records after the end";
}

TEST(LogFeedCore, PushesThatDoNotFollowOnOrAreNotRepliesAreRefused) {
  LogFeedCore core(0, 1 << 20);
  ASSERT_TRUE(core.push(reply(0, 10), 64));
  EXPECT_FALSE(core.push(json{{"next_offset", 5}, {"records", json::array({1})}}, 8)) << "going back";
  EXPECT_FALSE(core.push(json{{"next_offset", 10}, {"records", json::array({1})}}, 8)) << "records that take no bytes";
  EXPECT_FALSE(core.push(json{{"next_offset", 30}, {"records", json::array()}}, 8)) << "a jump without records";
  EXPECT_FALSE(core.push(json::array(), 8));
  EXPECT_FALSE(core.push(json{{"records", json::array()}}, 8));
  EXPECT_FALSE(core.push(json{{"next_offset", -1}, {"records", json::array()}}, 8));
  EXPECT_FALSE(core.push(json{{"next_offset", 20}, {"records", "x"}}, 8));
  EXPECT_FALSE(core.push(json{{"next_offset", 20}, {"records", json::array({1})}, {"ended", "yes"}}, 8));
  EXPECT_EQ(core.end(), 10u) << "a refused push changes nothing";
  EXPECT_EQ(core.poll(0).reply["next_offset"], 10);
}

TEST(LogFeedCore, WhatIsKeptIsBoundedAndUnreadBytesStopTheReading) {
  const size_t max = 1000;
  LogFeedCore core(0, max);
  uint64_t at = 0;
  for (int i = 0; i < 25; ++i, at += 10) ASSERT_TRUE(core.push(reply(at, at + 10), 100));
  // Nobody read: past twice the bound the oldest go anyway, and the feed is full.
  EXPECT_LE(core.held_bytes(), 2 * max);
  EXPECT_TRUE(core.full());
  EXPECT_EQ(core.poll(0).verdict, Verdict::kElsewhere) << "dropped: run.logs has it";
  // A follower reads on from what is kept: the read part may go, the feed is no longer full.
  uint64_t from = core.base();
  while (from < core.end()) {
    auto p = core.poll(from);
    ASSERT_EQ(p.verdict, Verdict::kAnswer) << from;
    from = p.reply["next_offset"].get<uint64_t>();
  }
  EXPECT_FALSE(core.full());
  ASSERT_TRUE(core.push(reply(at, at + 10), 100));
  EXPECT_LE(core.held_bytes(), max + 100);
}

// Seeded: any sequence of pushes (good and bad) and polls keeps the
// invariants: every answer is a pushed reply starting where it was asked,
// the kept bytes stay under twice the bound plus one reply, and a follower
// that always polls where the last answer ended reads every pushed reply
// once, in order, or is sent to run.logs.
TEST(LogFeedCore, AFollowerReadsEveryPushOnceInOrderOrIsSentToRunLogs) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const size_t max = 200 + rng() % 800;
    LogFeedCore core(0, max);
    uint64_t end = 0;
    uint64_t follower = 0;
    std::vector<uint64_t> pushed_starts;
    for (int step = 0; step < 200; ++step) {
      if (rng() % 3 != 0) {
        uint64_t len = 1 + rng() % 50;
        bool bad = rng() % 10 == 0;
        // A bad push goes back before the end, or jumps ahead without records.
        json pushed = !bad ? reply(end, end + len)
                      : end > 0 && rng() % 2 == 0 ? reply(0, end - 1 - rng() % end)
                                                  : json{{"records", json::array()}, {"next_offset", end + len}};
        Status s = core.push(pushed, 50 + rng() % 100);
        if (bad) {
          EXPECT_FALSE(s) << "seed " << seed;
        } else {
          ASSERT_TRUE(s) << "seed " << seed;
          pushed_starts.push_back(end);
          end += len;
        }
        ASSERT_LE(core.held_bytes(), 2 * max + 150) << "seed " << seed;
        continue;
      }
      auto p = core.poll(follower);
      if (p.verdict == Verdict::kAnswer) {
        uint64_t next = p.reply["next_offset"].get<uint64_t>();
        ASSERT_GT(next, follower) << "seed " << seed;
        ASSERT_EQ(p.reply["records"][0]["data"], std::to_string(follower)) << "seed " << seed;
        follower = next;
      } else if (p.verdict == Verdict::kWait) {
        ASSERT_EQ(follower, end) << "seed " << seed;
      } else {
        // Dropped before it was read: run.logs would answer; the follower
        // then goes on from the next kept boundary, as it would after it.
        ASSERT_LT(follower, core.base()) << "seed " << seed;
        follower = core.base();
      }
    }
  }
}

}  // namespace
}  // namespace yonder::jobs::consumer
