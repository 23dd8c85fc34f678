// The two sides of `yonder cp` (cli/cp_paths.h): docker's path forms on our
// workspace, and what LOCAL means.
#include "cli/cp_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"

namespace yonder::cli {
namespace {

TEST(WorkspaceRelative, TakesDockersAbsolutePathsInTheWorkspace) {
  struct Case {
    const char* given;
    const char* relative;
  };
  for (auto c : {Case{"results/a.json", "results/a.json"}, Case{"./results/", "results"}, Case{".", ""},
                 Case{"", ""}, Case{"/workspace", ""}, Case{"/workspace/", ""},
                 Case{"/workspace/results/a.json", "results/a.json"}, Case{"/workspace//results", "results"}}) {
    auto r = workspace_relative(c.given);
    ASSERT_TRUE(r.ok()) << c.given << ": " << r.error().to_string();
    EXPECT_EQ(*r, c.relative) << c.given;
  }
  for (const char* outside : {"/etc/passwd", "/workspaces/x", "/"}) {
    auto r = workspace_relative(outside);
    ASSERT_FALSE(r.ok()) << outside;
    EXPECT_NE(r.error().message().find("only /workspace"), std::string::npos) << r.error().message();
  }
  EXPECT_FALSE(workspace_relative("/workspace/../etc").ok());
  EXPECT_FALSE(workspace_relative("a/../../b").ok());
}

TEST(CpOutTarget, AFolderAFileNameOrStandardOutput) {
  testing::TempDir dir;
  std::ofstream(dir / "have.json") << "{}";
  EXPECT_EQ(cp_out_target("-").value(), CpOut::kToStdout);
  EXPECT_EQ(cp_out_target(dir.path()).value(), CpOut::kIntoFolder);
  EXPECT_EQ(cp_out_target("").value(), CpOut::kIntoFolder);  // "."
  EXPECT_EQ(cp_out_target(dir / "have.json").value(), CpOut::kToFile);
  EXPECT_EQ(cp_out_target(dir / "new.json").value(), CpOut::kToFile);
  auto no_folder = cp_out_target(dir / "missing/new.json");
  ASSERT_FALSE(no_folder.ok());
  EXPECT_NE(no_folder.error().message().find("mkdir -p " + (dir / "missing")), std::string::npos)
      << no_folder.error().message();
  auto not_a_folder = cp_out_target(dir / "newdir/");
  ASSERT_FALSE(not_a_folder.ok());
  EXPECT_NE(not_a_folder.error().message().find("is not a folder here"), std::string::npos);
  EXPECT_FALSE(cp_out_target("/dev/null").ok());  // a device: neither
}

}  // namespace
}  // namespace yonder::cli
