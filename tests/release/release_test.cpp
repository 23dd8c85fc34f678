// Completion scripts and man pages generated from a CLI11 definition
// (src/release): pure, on a small App shaped like yonder's.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "release/cli_doc.h"
#include "release/completion.h"
#include "release/man_page.h"
#include "release/version.h"

namespace yonder::release {
namespace {

struct ToyApp {
  CLI::App app{"toy: a test program.\nSecond line."};
  bool json = false;
  std::string key, value, on;
  int count = 0;
  std::vector<std::string> command;

  ToyApp() {
    app.add_flag("--json", json, "Machine-readable output");
    auto* cfg = app.add_subcommand("config", "Read and change settings");
    auto* get = cfg->add_subcommand("get", "Print a setting's value");
    get->add_option("key", key, "Setting, e.g. log.level")->required();
    auto* run = app.add_subcommand("run", "Run a command: toy run --on PEER -- CMD");
    run->add_option("--on", on, "Provider");
    run->add_option("-c,--count", count, "How many");
    run->add_option("command", command, "The command");
    app.add_subcommand("secret", "Hidden")->group("");
    app.add_option("--internal", value, "Hidden")->group("");
  }
};

TEST(CliDoc, ReadsTheTreeAndLeavesHiddenThingsOut) {
  ToyApp toy;
  CommandDoc doc = describe(toy.app, "toy");
  EXPECT_EQ(doc.name, "toy");
  ASSERT_EQ(doc.subcommands.size(), 2u);
  EXPECT_EQ(doc.subcommands[0].name, "config");
  EXPECT_EQ(doc.subcommands[1].name, "run");
  for (const auto& o : doc.options) {
    for (const auto& n : o.names) EXPECT_NE(n, "--internal");
  }
  const CommandDoc& run = doc.subcommands[1];
  ASSERT_EQ(run.positionals.size(), 1u);
  EXPECT_EQ(run.positionals[0].name, "command");
  EXPECT_TRUE(run.positionals[0].repeats);
  bool saw_count = false;
  for (const auto& o : run.options) {
    if (o.names == std::vector<std::string>{"-c", "--count"}) {
      saw_count = true;
      EXPECT_FALSE(o.value_name.empty());
    }
  }
  EXPECT_TRUE(saw_count);
  auto paths = command_paths(doc);
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[0].words, "toy");
  EXPECT_EQ(paths[2].words, "toy config get");
}

TEST(Completion, EachShellKnowsTheSubcommandsAndOptions) {
  ToyApp toy;
  CommandDoc doc = describe(toy.app, "toy");
  std::string bash = completion_script(doc, Shell::kBash);
  EXPECT_NE(bash.find("'toy config') subs='get'"), std::string::npos) << bash;
  EXPECT_NE(bash.find("vopts='--on -c --count'"), std::string::npos) << bash;
  EXPECT_NE(bash.find("complete -o filenames -F _toy toy"), std::string::npos);
  EXPECT_EQ(bash.find("secret"), std::string::npos);
  std::string zsh = completion_script(doc, Shell::kZsh);
  EXPECT_EQ(zsh.rfind("#compdef toy\n", 0), 0u);
  EXPECT_NE(zsh.find("'get:Print a setting'\\''s value'"), std::string::npos) << zsh;
  std::string fish = completion_script(doc, Shell::kFish);
  EXPECT_NE(fish.find("-l 'count' -r"), std::string::npos) << fish;
  EXPECT_NE(fish.find("-a 'get' -d 'Print a setting\\'s value'"), std::string::npos) << fish;
  EXPECT_EQ(parse_shell("zsh"), Shell::kZsh);
  EXPECT_FALSE(parse_shell("tcsh"));
}

TEST(ManPage, HasEveryCommandAndEscapesRoff) {
  ToyApp toy;
  ManPageInfo info;
  info.section = 8;
  info.version = "toy 1.0";
  info.summary = "a test program";
  info.extra = {{"Files", ".hidden starts with a dot\nand a back\\slash"}};
  info.see_also = {"yonder(1)", "yonderd(8)"};
  std::string page = man_page(describe(toy.app, "toy"), info);
  EXPECT_NE(page.find(".TH TOY 8 \"\" \"toy 1.0\" \"System Administration\"\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SS \"toy config get\"\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\\fB\\-c\\fR, \\fB\\-\\-count\\fR \\fIINT\\fR"), std::string::npos) << page;
  EXPECT_NE(page.find("\\fIKEY\\fR"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH FILES\n\\&.hidden starts with a dot and a back\\eslash\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".BR yonder (1),\n.BR yonderd (8)\n"), std::string::npos) << page;
  EXPECT_EQ(page.find("secret"), std::string::npos);
  EXPECT_EQ(page.find("internal"), std::string::npos);
}

TEST(Version, LineNamesProgramVersionAndRevision) {
  std::string line = version_line("yonderd");
  EXPECT_EQ(line.rfind("yonderd " + std::string(project_version()) + " (git ", 0), 0u) << line;
  EXPECT_FALSE(git_revision().empty());
}

}  // namespace
}  // namespace yonder::release
