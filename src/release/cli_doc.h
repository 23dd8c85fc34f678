// A program's command-line interface as plain data, read from its CLI11
// definition, so completion scripts and man pages are generated from the
// one place the interface is defined (apps/*/main.cpp) and cannot drift.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace yonder::release {

struct OptionDoc {
  std::vector<std::string> names;  // as typed: "-c", "--count"
  std::string value_name;          // "" for a flag; else e.g. "TEXT", "INT"
  std::string description;
};

struct PositionalDoc {
  std::string name;  // "peer"
  std::string description;
  bool required = false;
  bool repeats = false;  // takes the rest of the words
};

struct CommandDoc {
  std::string name;         // "yonder" at the root, then "config", "get", ...
  std::string description;  // first line: the summary
  std::vector<OptionDoc> options;
  std::vector<PositionalDoc> positionals;
  std::vector<CommandDoc> subcommands;
};

// Reads `app` (and its visible subcommands, recursively). Hidden options and
// subcommands (CLI11 group "") are left out. `name` names the root.
CommandDoc describe(const CLI::App& app, const std::string& name);

// Every command path below `root`, root first, as "yonder config get" style
// words, each with its command: the walk the generators share.
struct CommandPath {
  std::string words;
  const CommandDoc* command;
};
std::vector<CommandPath> command_paths(const CommandDoc& root);

}  // namespace yonder::release
