#include "transfer/outputs_policy.h"

#include <gtest/gtest.h>

namespace yonder::transfer {
namespace {

OutputsPolicy policy_with(std::vector<std::string> named = {}) {
  OutputsPolicy p;
  p.ignore.add("secrets.env\nnode_modules/\n*.key\n");
  p.uploaded = std::set<std::string>{"train.py", "data/a.csv", "run.sh"};
  p.named = std::move(named);
  return p;
}

TEST(OutputsPolicy, GitFolderNeverComesHomeEvenWhenNamed) {
  for (auto p : {policy_with(), policy_with({".git"}), policy_with({".git/hooks/pre-commit"}), policy_with({"sub"})}) {
    EXPECT_EQ(p.decide(".git/hooks/pre-commit", 0755, false).refusal, OutputRefusal::kGitFolder);
    EXPECT_EQ(p.decide(".git/config", 0644, true).refusal, OutputRefusal::kGitFolder);
    EXPECT_EQ(p.decide("sub/.git/config", 0644, false).refusal, OutputRefusal::kGitFolder);
  }
  EXPECT_EQ(policy_with().decide("a.git/x", 0644, false).refusal, OutputRefusal::kNone);
}

TEST(OutputsPolicy, IgnoreFilesComeHomeOnlyWhenNamed) {
  EXPECT_EQ(policy_with().decide(".gitignore", 0644, true).refusal, OutputRefusal::kIgnoreFile);
  EXPECT_EQ(policy_with().decide("sub/.yonderignore", 0644, false).refusal, OutputRefusal::kIgnoreFile);
  EXPECT_EQ(policy_with({".gitignore"}).decide(".gitignore", 0644, true).refusal, OutputRefusal::kNone);
}

TEST(OutputsPolicy, PathsTheUploadExcludedComeHomeOnlyWhenNamed) {
  auto p = policy_with();
  EXPECT_EQ(p.decide("secrets.env", 0644, true).refusal, OutputRefusal::kExcluded);
  EXPECT_EQ(p.decide("secrets.env", 0644, false).refusal, OutputRefusal::kExcluded);
  EXPECT_EQ(p.decide("node_modules/x/index.js", 0644, false).refusal, OutputRefusal::kExcluded);
  EXPECT_EQ(p.decide("keys/id.key", 0644, false).refusal, OutputRefusal::kExcluded);
  EXPECT_EQ(policy_with({"secrets.env"}).decide("secrets.env", 0644, true).refusal, OutputRefusal::kNone);
}

TEST(OutputsPolicy, ALocalFileThatWasNotUploadedIsNotReplaced) {
  auto p = policy_with();
  EXPECT_EQ(p.decide("notes.txt", 0644, true).refusal, OutputRefusal::kNotUploaded);
  EXPECT_EQ(p.decide("train.py", 0644, true).refusal, OutputRefusal::kNone);  // uploaded: may be replaced
  EXPECT_EQ(p.decide("results/out.txt", 0644, false).refusal, OutputRefusal::kNone);  // new
  EXPECT_EQ(policy_with({"notes.txt"}).decide("notes.txt", 0644, true).refusal, OutputRefusal::kNone);
  OutputsPolicy unlisted = policy_with();
  unlisted.uploaded.reset();  // the folder could not be listed: replace nothing unnamed
  EXPECT_EQ(unlisted.decide("train.py", 0644, true).refusal, OutputRefusal::kNotUploaded);
}

TEST(OutputsPolicy, AnExecuteBitComesHomeOnlyWhenNamed) {
  EXPECT_EQ(policy_with().decide("run.sh", 0755, true).mode, 0644u);
  EXPECT_EQ(policy_with().decide("bin/tool", 04755, false).mode, 0644u);
  EXPECT_EQ(policy_with({"bin"}).decide("bin/tool", 04755, false).mode, 0755u);  // never setuid
  EXPECT_EQ(policy_with({"bin/tool"}).decide("bin/tool", 0700, false).mode, 0700u);
  EXPECT_EQ(policy_with({""}).decide("bin/tool", 0755, false).mode, 0644u);  // `--out .` names nothing in particular
  EXPECT_EQ(policy_with({"bi"}).decide("bin/tool", 0755, false).mode, 0644u);  // a prefix is not a folder above
}

TEST(OutputsPolicy, SkipsAreDescribedInOneLine) {
  OutputSkips s;
  EXPECT_EQ(describe(s), "");
  s.count(OutputRefusal::kGitFolder);
  s.count(OutputRefusal::kGitFolder);
  s.count(OutputRefusal::kIgnoreFile);
  EXPECT_EQ(s.total(), 3u);
  std::string line = describe(s);
  EXPECT_NE(line.find("2 files under .git"), std::string::npos) << line;
  EXPECT_NE(line.find("1 ignore file"), std::string::npos) << line;
}

}  // namespace
}  // namespace yonder::transfer
