// The release files generated from the real programs (src/release): the
// completion scripts are accepted by their shells and complete real
// subcommands; the man pages format without warnings; --version names the
// git revision.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

bool have(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string completion(const std::string& shell) {
  auto r = run({program_path("yonder"), "completion", shell});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("group"), std::string::npos);
  return r.out;
}

TEST(ReleaseFiles, VersionLinesNameTheGitRevision) {
  for (std::string program : {"yonder", "yonderd", "yonder-relay"}) {
    auto r = run({program_path(program), "--version"});
    EXPECT_EQ(r.exit_code, 0) << program << ": " << r.err;
    EXPECT_EQ(r.out.rfind(program + " 0.", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(" (git "), std::string::npos) << r.out;
  }
}

TEST(ReleaseFiles, BashCompletesSubcommandsAndOptions) {
  TempDir dir;
  std::string script = write_file(dir, "yonder.bash", completion("bash"));
  auto syntax = run({"/bin/bash", "-n", script});
  ASSERT_EQ(syntax.exit_code, 0) << syntax.err;
  // COMP_WORDS as bash fills them for the typed line; prints the candidates.
  auto complete = [&](const std::string& words, int cword) {
    auto r = run({"/bin/bash", "-c",
                  "source " + script + "; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                      "; _yonder; printf '%s\\n' \"${COMPREPLY[@]}\""});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_NE(complete("yonder gr", 1).find("group\n"), std::string::npos);
  EXPECT_EQ(complete("yonder gr", 1).find("gpu\n"), std::string::npos);
  EXPECT_NE(complete("yonder group mem", 2).find("members\n"), std::string::npos);
  std::string run_opts = complete("yonder run --image img --o", 4);
  EXPECT_NE(run_opts.find("--on\n"), std::string::npos) << run_opts;
  EXPECT_NE(run_opts.find("--out\n"), std::string::npos) << run_opts;
  EXPECT_NE(complete("yonder config s", 2).find("show\n"), std::string::npos);
}

TEST(ReleaseFiles, ZshAcceptsItsCompletion) {
  if (!have("/usr/bin/zsh")) GTEST_SKIP() << "zsh is not installed (scripts/packages.txt lists it)";
  TempDir dir;
  std::string text = completion("zsh");
  EXPECT_EQ(text.rfind("#compdef yonder\n", 0), 0u);
  std::string script = write_file(dir, "_yonder", text);
  auto syntax = run({"/usr/bin/zsh", "-n", script});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  // Loaded the way compinit loads it: defines the function and registers it.
  auto loaded = run({"/usr/bin/zsh", "-fc",
                     "autoload -U compinit && compinit -u -D && source " + script + " && echo ${_comps[yonder]}"});
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_EQ(loaded.out, "_yonder\n") << loaded.err;
}

TEST(ReleaseFiles, FishCompletesSubcommands) {
  if (!have("/usr/bin/fish")) GTEST_SKIP() << "fish is not installed (scripts/packages.txt lists it)";
  TempDir dir;
  std::string script = write_file(dir, "yonder.fish", completion("fish"));
  auto syntax = run({"/usr/bin/fish", "--no-execute", script});
  ASSERT_EQ(syntax.exit_code, 0) << syntax.err;
  Env env{{"HOME", dir.path()}, {"XDG_CONFIG_HOME", dir.path()}, {"XDG_DATA_HOME", dir.path()}};
  auto complete = [&](const std::string& line) {
    auto r = run({"/usr/bin/fish", "--no-config", "-c", "source " + script + "; complete -C '" + line + "'"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_NE(complete("yonder gr").find("group\t"), std::string::npos);
  EXPECT_NE(complete("yonder group mem").find("members\t"), std::string::npos);
  EXPECT_NE(complete("yonder run --image img --o").find("--on\t"), std::string::npos);
}

TEST(ReleaseFiles, ManPagesFormatWithoutWarnings) {
  if (!have("/usr/bin/groff")) GTEST_SKIP() << "groff is not installed";
  TempDir dir;
  for (std::string program : {"yonder", "yonderd", "yonder-relay"}) {
    auto page = run({program_path(program), "--help-man"});
    ASSERT_EQ(page.exit_code, 0) << program << ": " << page.err;
    EXPECT_EQ(page.out.rfind(".\\\" Generated", 0), 0u) << page.out.substr(0, 200);
    std::string file = write_file(dir, program + ".man", page.out);
    auto formatted = run({"/usr/bin/groff", "-man", "-Tutf8", "-ww", "-z", file});
    EXPECT_EQ(formatted.exit_code, 0) << formatted.err;
    EXPECT_EQ(formatted.err, "") << program;
  }
  auto page = run({program_path("yonder"), "--help-man"});
  EXPECT_NE(page.out.find(".SS \"yonder group members\""), std::string::npos);
  EXPECT_NE(page.out.find(".SS \"yonder completion\""), std::string::npos);
  auto relay = run({program_path("yonder-relay"), "--help-man"});
  EXPECT_NE(relay.out.find("\\fB\\-\\-key\\-file\\fR"), std::string::npos);
}

}  // namespace
}  // namespace yonder::testing
