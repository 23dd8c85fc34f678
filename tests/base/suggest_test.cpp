#include "base/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace yonder {
namespace {

TEST(Suggest, EditDistanceCountsInsertsDeletesReplacesAndSwaps) {
  EXPECT_EQ(edit_distance("logs", "logs"), 0u);
  EXPECT_EQ(edit_distance("lgos", "logs"), 1u);  // two neighbours swapped
  EXPECT_EQ(edit_distance("log", "logs"), 1u);
  EXPECT_EQ(edit_distance("lags", "logs"), 1u);
  EXPECT_EQ(edit_distance("LOGS", "logs"), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Suggest, OnlyACloseUnambiguousWordIsSuggested) {
  const std::vector<std::string> commands = {"run", "ps", "logs", "stop", "share", "peers", "pair", "exec", "mesh"};
  EXPECT_EQ(closest_match("lgos", commands), "logs");
  EXPECT_EQ(closest_match("shar", commands), "share");
  EXPECT_EQ(closest_match("peer", commands), "peers");
  EXPECT_EQ(closest_match("kubernetes", commands), "") << "nothing close";
  EXPECT_EQ(closest_match("hat", {"cat", "bat"}), "") << "two equally close: no guess";
  const std::vector<std::string> settings = {"jobs.max_per_peer", "jobs.max_queued", "jobs.max_concurrent"};
  EXPECT_EQ(closest_match("jobs.max_per_peeer", settings), "jobs.max_per_peer");
  EXPECT_EQ(did_you_mean("job.max_queued", settings), "; did you mean `jobs.max_queued`?");
  EXPECT_EQ(did_you_mean("zzz", settings), "");
}

}  // namespace
}  // namespace yonder
