#include "transfer/tree_fetch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

// The policy fetch_consumer builds for fetching into `dir`.
OutputsPolicy policy_for(const std::string& dir, std::vector<std::string> named) {
  auto listing = list_tree(dir, ArchiveLimits{});
  return outputs_policy_for(listing ? &*listing : nullptr, dir, std::move(named));
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
  auto moved = move_tree_into(from, into, policy_for(into, {}));
  ASSERT_TRUE(moved.ok()) << moved.error().to_string();
  EXPECT_EQ(moved->files, std::vector<std::string>{"a/b.txt"});
  EXPECT_EQ(moved->replaced, std::vector<std::string>{"a/b.txt"});
  EXPECT_EQ(read(into + "/a/b.txt"), "b\n");

  fs::create_directories(outside);
  ASSERT_EQ(::symlink(outside.c_str(), (into + "/link").c_str()), 0);
  write(from + "/link/evil.txt", "evil\n");
  auto refused = move_tree_into(from, into, policy_for(into, {}));
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(fs::exists(outside + "/evil.txt"));
}

// A consumer's repository, and what a hostile job left in its workspace
// (the fetched archive, extracted into `from`).
struct Repo {
  testing::TempDir dir;
  std::string from = dir / "from", into = dir / "into";
  Repo() {
    write(into + "/.git/config", "[core]\n");
    write(into + "/.gitignore", "secrets.env\n");
    write(into + "/secrets.env", "TOKEN=real\n");
    write(into + "/train.py", "print(1)\n");
    write(into + "/notes.txt", "mine\n");
  }
  Result<MovedOutputs> fetch(std::vector<std::string> named = {}) {
    return move_tree_into(from, into, policy_for(into, std::move(named)));
  }
};

TEST(OutputsHome, GitHooksAndConfigWrittenByAJobDoNotReachTheConsumer) {
  Repo r;
  write(r.from + "/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/owned\n");
  ::chmod((r.from + "/.git/hooks/pre-commit").c_str(), 0755);
  write(r.from + "/.git/config", "[core]\n\tfsmonitor = \"touch /tmp/owned\"\n");
  write(r.from + "/result.txt", "42\n");
  auto got = r.fetch({".git"});  // not even when named
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->files, std::vector<std::string>{"result.txt"});
  EXPECT_EQ(got->skipped.git, 2u);
  EXPECT_FALSE(fs::exists(r.into + "/.git/hooks/pre-commit"));
  EXPECT_EQ(read(r.into + "/.git/config"), "[core]\n");
}

TEST(OutputsHome, AnExecuteBitDoesNotComeHomeUnlessNamed) {
  Repo r;
  write(r.from + "/tool.sh", "#!/bin/sh\n");
  write(r.from + "/bin/named.sh", "#!/bin/sh\n");
  ::chmod((r.from + "/tool.sh").c_str(), 0755);
  ::chmod((r.from + "/bin/named.sh").c_str(), 0755);
  auto got = r.fetch({"bin/named.sh", "tool.sh"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(fs::status(r.into + "/bin/named.sh").permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
  write(r.from + "/tool.sh", "#!/bin/sh\necho again\n");
  ::chmod((r.from + "/tool.sh").c_str(), 0755);
  ASSERT_TRUE(r.fetch().ok());  // "what changed": nothing named
  EXPECT_EQ(fs::status(r.into + "/tool.sh").permissions() & fs::perms::all, fs::perms(0644));
}

TEST(OutputsHome, AFileTheUploadExcludedIsNotReplaced) {
  Repo r;
  write(r.from + "/secrets.env", "TOKEN=the-providers\n");
  write(r.from + "/notes.txt", "theirs\n");  // here, but not uploaded? it was: not ignored
  write(r.from + "/train.py", "print(2)\n");
  auto got = r.fetch();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(read(r.into + "/secrets.env"), "TOKEN=real\n");
  EXPECT_EQ(got->skipped.excluded, 1u);
  EXPECT_EQ(read(r.into + "/train.py"), "print(2)\n");
  EXPECT_EQ(got->replaced, (std::vector<std::string>{"notes.txt", "train.py"}));
}

TEST(OutputsHome, AGitignoreRewrittenByAJobIsNotBroughtHome) {
  Repo r;
  write(r.from + "/.gitignore", "# nothing ignored any more\n");
  write(r.from + "/sub/.yonderignore", "!secrets.env\n");
  auto got = r.fetch();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(read(r.into + "/.gitignore"), "secrets.env\n");
  EXPECT_FALSE(fs::exists(r.into + "/sub/.yonderignore"));
  EXPECT_EQ(got->skipped.ignore_files, 2u);
  EXPECT_NE(describe(got->skipped).find("--out"), std::string::npos);
}

}  // namespace
}  // namespace yonder::transfer
