#include "base/hook.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace yonder {
namespace {

TEST(Hook, EverySubscriberHearsEachFireInTheOrderItSubscribed) {
  Hook<std::string, int> ended;
  std::vector<std::string> heard;
  ended.fire("nobody listens yet", 0);
  ended.subscribe(
      [&](const std::string& id, const int& code) { heard.push_back("receipts " + id + " " + std::to_string(code)); });
  ended.subscribe([&](const std::string& id, const int&) { heard.push_back("mesh " + id); });
  ended.fire("j1", 3);
  ended.fire("j2", 0);
  EXPECT_EQ(heard, (std::vector<std::string>{"receipts j1 3", "mesh j1", "receipts j2 0", "mesh j2"}));
  EXPECT_EQ(ended.size(), 2u);
}

TEST(Hook, AnEventWithNoArguments) {
  Hook<> submitted;
  int n = 0;
  submitted.subscribe([&] { ++n; });
  submitted.subscribe([&] { n += 10; });
  submitted.fire();
  EXPECT_EQ(n, 11);
}

}  // namespace
}  // namespace yonder
