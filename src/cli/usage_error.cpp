#include "cli/usage_error.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/suggest.h"
#include "cli/exit_codes.h"

namespace yonder::cli {

std::string usage_error_text(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args) {
  // The deepest command that was recognised: its usage is the one to show.
  const CLI::App* at = &app;
  while (true) {
    auto parsed = at->get_subcommands();
    if (parsed.empty()) break;
    at = parsed.front();
  }
  std::string hint;
  if (at == &app) {
    // No command recognised: the first word that is not an option was
    // meant as one.
    for (const auto& a : args) {
      if (a.empty() || a[0] == '-') continue;
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
      }
      hint = did_you_mean(a, names);
      if (!hint.empty()) hint = " (`" + a + "` is not a command" + hint + ")";
      break;
    }
  }
  CLI::Formatter formatter;
  std::string usage = formatter.make_usage(at, at == &app ? "yonder" : "yonder " + at->get_name());
  while (!usage.empty() && (usage.front() == '\n')) usage.erase(0, 1);
  while (!usage.empty() && (usage.back() == '\n')) usage.pop_back();
  return "yonder: " + std::string(e.what()) + hint + "\n" + usage + "\n" + "(`" +
         (at == &app ? std::string("yonder") : "yonder " + at->get_name()) + " --help` shows every option)\n";
}

int report_usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::fputs(usage_error_text(app, e, args).c_str(), stderr);
  return kExitUsage;
}

}  // namespace yonder::cli
