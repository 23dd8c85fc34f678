#include "cli/usage_error.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace yonder::cli {
namespace {

// What `yonder` prints for each bad command line, from a small app shaped
// like the real one.
std::string error_for(std::vector<std::string> args) {
  CLI::App app{"test", "yonder"};
  app.require_subcommand(1);
  std::string image;
  auto* run = app.add_subcommand("run", "Run a job");
  run->add_option("--image", image, "Image")->required();
  app.add_subcommand("logs", "Show a job's output");
  app.add_subcommand("peers", "List peers");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return usage_error_text(app, e, args);
  }
  return "";
}

TEST(UsageError, AMistypedCommandGetsTheClosestOneAndTheUsageLine) {
  std::string text = error_for({"lgos", "abc"});
  EXPECT_EQ(text.rfind("yonder: ", 0), 0u) << text;
  EXPECT_NE(text.find("did you mean `logs`?"), std::string::npos) << text;
  EXPECT_NE(text.find("yonder [OPTIONS] SUBCOMMAND"), std::string::npos) << text;
  EXPECT_EQ(error_for({"kubernetes"}).find("did you mean"), std::string::npos);
}

TEST(UsageError, AnErrorInsideACommandShowsThatCommandsUsage) {
  std::string text = error_for({"run"});
  EXPECT_EQ(text.rfind("yonder: ", 0), 0u) << text;
  EXPECT_NE(text.find("--image"), std::string::npos) << text;
  EXPECT_NE(text.find("yonder run"), std::string::npos) << text;
  EXPECT_NE(text.find("`yonder run --help`"), std::string::npos) << text;
}

}  // namespace
}  // namespace yonder::cli
