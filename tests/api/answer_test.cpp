// How a service answers a C++ call and a route adapts it (api/answer.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/answer.h"

namespace yonder::api {
namespace {

using nlohmann::json;

// A body built in C++ holds signed integers where the same body parsed from
// text holds unsigned ones; a service must read both alike (an array's
// {"retries", 0} once failed a mesh job's check this way).
TEST(Answer, AWholeNumberFieldReadsTheSameBuiltInCxxOrParsed) {
  json built = {{"retries", 0}, {"gpus", 2}};
  json parsed = json::parse(built.dump());
  ASSERT_TRUE(built["retries"].is_number_integer() && !built["retries"].is_number_unsigned());
  ASSERT_TRUE(parsed["retries"].is_number_unsigned());
  for (const json* b : {&built, &parsed}) {
    EXPECT_EQ(body_uint(*b, "retries", 7, 100).value(), 0u);
    EXPECT_EQ(body_uint(*b, "gpus", 1, 8).value(), 2u);
    EXPECT_EQ(body_uint(*b, "absent", 7, 100).value(), 7u);
  }
  for (const json& bad : {json{{"n", -1}}, json{{"n", 1.5}}, json{{"n", "3"}}, json{{"n", 101}}}) {
    auto r = body_uint(bad, "n", 0, 100);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("\"n\" must be a whole number up to 100"), std::string::npos);
  }
}

TEST(Answer, ARouteSendsTheAnswersJsonOrItsErrorsStatus) {
  Response sent;
  answer_with([&](Response r) { sent = std::move(r); })(json{{"ok", true}});
  EXPECT_EQ(sent.status, 200);
  EXPECT_EQ(json::parse(sent.body)["ok"], true);
  answer_with([&](Response r) { sent = std::move(r); })(make_error(ErrorCode::kNotFound, "no such job"));
  EXPECT_EQ(sent.status, Response::error(make_error(ErrorCode::kNotFound, "x")).status);
  EXPECT_NE(sent.status, 200);
  EXPECT_NE(sent.body.find("no such job"), std::string::npos);
  EXPECT_TRUE(body_json(Request{}).is_discarded());
}

}  // namespace
}  // namespace yonder::api
