// A helper's answer to reach.dial_back, read at the edge
// (net/reach/dial_back.h): a paired peer may answer anything, and what it
// answers must neither count for more than we asked nor throw.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/reach/dial_back.h"

namespace yonder::reach {
namespace {

const std::vector<std::string> kAsked = {"203.0.113.2:7850", "198.51.100.7:7850"};

TEST(DialBackAnswer, CountsOnlyWhatWasAskedAndOnlyATrueReached) {
  nlohmann::json answer = {{"results",
                            {{{"address", "203.0.113.2:7850"}, {"reached", "yes"}},  // not a boolean: threw before
                             {{"address", "198.51.100.7:7850"}, {"reached", true}},
                             {{"address", "192.0.2.1:1"}, {"reached", true}},  // not asked about
                             {{"address", 7}, {"reached", true}},
                             "junk",
                             nullptr}}};
  DialBackAnswer a = read_dial_back_answer("ben", kAsked, answer);
  EXPECT_EQ(a.helper, "ben");
  EXPECT_FALSE(a.error);
  EXPECT_EQ(a.reached, (std::map<std::string, bool>{{"203.0.113.2:7850", false}, {"198.51.100.7:7850", true}}));
}

TEST(DialBackAnswer, UdpResultsCountOnlyForTheUdpAddressesAskedAbout) {
  const std::vector<std::string> udp = {"203.0.113.2:40000"};
  nlohmann::json answer = {{"results",
                            {{{"address", "203.0.113.2:7850"}, {"reached", true}},
                             {{"address", "203.0.113.2:40000"}, {"transport", "udp"}, {"reached", true}},
                             // TCP was asked about this address, UDP was not
                             {{"address", "198.51.100.7:7850"}, {"transport", "udp"}, {"reached", true}},
                             {{"address", "203.0.113.2:40000"}, {"transport", 17}, {"reached", true}}}}};
  DialBackAnswer a = read_dial_back_answer("ben", kAsked, answer, udp);
  EXPECT_TRUE(a.tested_udp);
  EXPECT_EQ(a.reached, (std::map<std::string, bool>{{"203.0.113.2:7850", true}}));
  EXPECT_EQ(a.reached_udp, (std::map<std::string, bool>{{"203.0.113.2:40000", true}}));
  // A helper that answered for TCP only did not test UDP.
  DialBackAnswer tcp_only = read_dial_back_answer("ben", kAsked, nlohmann::json{{"results", {answer["results"][0]}}}, udp);
  EXPECT_FALSE(tcp_only.tested_udp);
  EXPECT_TRUE(tcp_only.reached_udp.empty());
}

TEST(DialBackAnswer, AnAnswerOfTheWrongShapeIsAnErrorNotAThrow) {
  for (const nlohmann::json& bad : {nlohmann::json{{"results", 3}}, nlohmann::json::array(), nlohmann::json("results"),
                                    nlohmann::json{{"result", nlohmann::json::array()}}, nlohmann::json()}) {
    DialBackAnswer a = read_dial_back_answer("ben", kAsked, bad);
    ASSERT_TRUE(a.error) << bad.dump();
    EXPECT_EQ(*a.error, "an answer without results") << bad.dump();
    EXPECT_TRUE(a.reached.empty()) << bad.dump();
  }
  DialBackAnswer failed =
      read_dial_back_answer("ben", kAsked, make_error(ErrorCode::kUnavailable, "no answer within 15 s"));
  ASSERT_TRUE(failed.error);
  EXPECT_NE(failed.error->find("no answer within 15 s"), std::string::npos) << *failed.error;
}

}  // namespace
}  // namespace yonder::reach
