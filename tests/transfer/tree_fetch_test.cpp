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

TEST(TreeFetch, SelectsWhatDiffersAndLeavesLinksBehind) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  write(ws + "/same.txt", "same\n");
  write(ws + "/changed.txt", "new\n");
  write(ws + "/out/result.bin", "xyz");
  ASSERT_EQ(::symlink("/etc", (ws + "/escape").c_str()), 0);
  HaveManifest have;
  have["same.txt"] = {5, *sha256_file(ws + "/same.txt")};
  have["changed.txt"] = {4, std::string(64, '0')};
  auto all = select_tree(ws, {}, have, ArchiveLimits{});
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  std::vector<std::string> paths;
  for (const auto& e : all->entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"changed.txt", "out", "out/result.bin"}));
  auto one = select_tree(ws, {"out/result.bin"}, {}, ArchiveLimits{});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->entries.size(), 2u);
  EXPECT_TRUE(one->entries[0].dir);
  EXPECT_FALSE(select_tree(ws, {"escape"}, {}, ArchiveLimits{}).ok());
  EXPECT_FALSE(select_tree(ws, {"escape/passwd"}, {}, ArchiveLimits{}).ok());
  EXPECT_EQ(select_tree(ws, {"missing"}, {}, ArchiveLimits{}).error().code(), ErrorCode::kNotFound);
  ArchiveLimits tiny;
  tiny.max_bytes = 2;
  EXPECT_EQ(select_tree(ws, {}, {}, tiny).error().code(), ErrorCode::kResourceExhausted);
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
