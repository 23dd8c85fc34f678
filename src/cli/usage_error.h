// How `yonder` reports a command line it cannot parse: with the `yonder:`
// prefix every other error has, a "did you mean" for a mistyped command,
// and the usage line of the command that was being parsed.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace yonder::cli {

// The text printed to stderr (pure: tested without a terminal). `argv`
// is what the user typed after the program name.
std::string usage_error_text(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args);

// Prints it and returns the exit status for a usage error (2).
int report_usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

}  // namespace yonder::cli
