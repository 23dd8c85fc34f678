#include "base/error.h"

#include <gtest/gtest.h>

namespace yonder {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return make_error(ErrorCode::kInvalidArgument, "must be positive");
  return x;
}

Result<int> doubled(int x) {
  auto r = parse_positive(x);
  if (!r) return Error(r.error()).with_context("doubling");
  return *r * 2;
}

Status check(int x) {
  YONDER_TRY(parse_positive(x));
  return ok_status();
}

TEST(Result, CarriesValueOrError) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().to_string(), "doubling: must be positive");
}

TEST(Result, TryPropagates) {
  EXPECT_TRUE(check(1).ok());
  auto st = check(0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "must be positive");
}

TEST(Error, ContextNestsOutermostFirst) {
  Error e = Error(ErrorCode::kNotFound, "gone").with_context("inner").with_context("outer");
  EXPECT_EQ(e.to_string(), "outer: inner: gone");
  EXPECT_STREQ(error_code_name(e.code()), "not_found");
}

// Names travel between nodes and through the local API: every code comes
// back from its name, and a name from a newer version falls back.
TEST(Error, CodesComeBackFromTheirNames) {
  for (ErrorCode c : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kAlreadyExists,
                      ErrorCode::kPermissionDenied, ErrorCode::kUnavailable, ErrorCode::kFailedPrecondition,
                      ErrorCode::kDataLoss, ErrorCode::kResourceExhausted, ErrorCode::kInternal}) {
    EXPECT_EQ(error_code_from_name(error_code_name(c)), c) << error_code_name(c);
  }
  EXPECT_EQ(error_code_from_name("some_new_code"), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(error_code_from_name("", ErrorCode::kUnavailable), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace yonder
