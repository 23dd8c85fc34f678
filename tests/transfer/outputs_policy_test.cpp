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

TEST(OutputsHome, MoreFilesThanTheCapAreRefusedNamingTheNumbersTheSettingsAndTheFlag) {
  OutputsBudget budget;  // the defaults: 10,000 files, 4 GiB
  auto st = check_outputs_fit(100'000, 100'000, ~uint64_t{0}, budget);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
  for (const char* needle : {"100000 file(s)", "10000 files", "outputs.max_files", "--no-outputs-limit", "--out"}) {
    EXPECT_NE(st.error().message().find(needle), std::string::npos) << needle << ": " << st.error().message();
  }
  EXPECT_TRUE(is_over_outputs_budget(st.error()));
  auto bytes = check_outputs_fit(1, 5ull << 30, ~uint64_t{0}, budget);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.error().message().find("5.0 GiB"), std::string::npos) << bytes.error().message();
  EXPECT_TRUE(check_outputs_fit(10'000, 4ull << 30, ~uint64_t{0}, budget).ok());  // at the cap: fine
  budget.lifted = true;                                                          // --no-outputs-limit, --out, cp
  EXPECT_TRUE(check_outputs_fit(100'000, 5ull << 30, ~uint64_t{0}, budget).ok());
}

TEST(OutputsHome, OutputsLargerThanTheFreeSpaceAreRefusedEvenWhenLifted) {
  OutputsBudget budget;
  budget.lifted = true;
  auto st = check_outputs_fit(3, 3ull << 30, 1ull << 30, budget);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(st.error().message().find("1.0 GiB free"), std::string::npos) << st.error().message();
  EXPECT_FALSE(is_over_outputs_budget(st.error()));  // not one a yes on the terminal lifts
  EXPECT_TRUE(check_outputs_fit(3, 1ull << 30, 1ull << 30, budget).ok());
}

}  // namespace
}  // namespace yonder::transfer
