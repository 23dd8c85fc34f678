#include "transfer/tree_fetch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"

namespace yonder::transfer {
namespace {

namespace fs = std::filesystem;

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TreeFetch, RequestPathsStayInsideTheWorkspace) {
  EXPECT_EQ(*normalize_request_path("results/"), "results");
  EXPECT_EQ(*normalize_request_path("./a/b"), "a/b");
  EXPECT_EQ(*normalize_request_path("."), "");
  for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "a//b"}) {
    EXPECT_FALSE(normalize_request_path(bad).ok()) << bad;
  }
}

TEST(TreeFetch, MovesIntoPlaceButNeverThroughALink) {
  testing::TempDir dir;
  std::string from = dir / "from", into = dir / "into", outside = dir / "outside";
  write(from + "/a/b.txt", "b\n");
  write(into + "/a/b.txt", "old\n");
  auto moved = move_tree_into(from, into);
  ASSERT_TRUE(moved.ok()) << moved.error().to_string();
  EXPECT_EQ(*moved, std::vector<std::string>{"a/b.txt"});
  EXPECT_EQ(read(into + "/a/b.txt"), "b\n");

  fs::create_directories(outside);
  ASSERT_EQ(::symlink(outside.c_str(), (into + "/link").c_str()), 0);
  write(from + "/link/evil.txt", "evil\n");
  auto refused = move_tree_into(from, into);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(fs::exists(outside + "/evil.txt"));
}

}  // namespace
}  // namespace yonder::transfer
