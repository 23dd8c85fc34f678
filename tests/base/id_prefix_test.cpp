#include "base/id_prefix.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace yonder {
namespace {

struct Row {
  std::string id;
};

constexpr IdNoun kJob{"a job", "job", "`yonder ps` lists them"};

TEST(IdPrefix, AnExactIdOrAUniqueStartOfFourOrMoreFindsTheRow) {
  std::vector<Row> rows = {{"a1b2c3d4"}, {"a1b2ffff"}, {"0123"}};
  EXPECT_EQ(find_by_id_prefix(rows, "a1b2c3d4", kJob)->id, "a1b2c3d4");
  EXPECT_EQ(find_by_id_prefix(rows, "a1b2c", kJob)->id, "a1b2c3d4");
  EXPECT_EQ(find_by_id_prefix(rows, "0123", kJob)->id, "0123") << "an exact id, however short";
}

TEST(IdPrefix, ATooShortOrAmbiguousStartSaysHowManyCharactersAreNeeded) {
  std::vector<Row> rows = {{"a1b2c3d4"}, {"a1b2ffff"}, {"a1b2c399"}};
  auto short_one = find_by_id_prefix(rows, "a1", kJob);
  ASSERT_FALSE(short_one.ok());
  EXPECT_NE(short_one.error().message().find("give at least 4 characters"), std::string::npos)
      << short_one.error().message();
  auto ambiguous = find_by_id_prefix(rows, "a1b2", kJob);
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.error().code(), ErrorCode::kInvalidArgument);
  // a1b2c3d4 and a1b2c399 share six characters: seven tell them apart.
  EXPECT_NE(ambiguous.error().message().find("names 3 jobs; give at least 7 characters"), std::string::npos)
      << ambiguous.error().message();
  auto none = find_by_id_prefix(rows, "zzzz", kJob);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.error().message().find("`yonder ps` lists them"), std::string::npos);
}

}  // namespace
}  // namespace yonder
