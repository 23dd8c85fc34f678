#include "release/cli_doc.h"

#include <CLI/CLI.hpp>

namespace yonder::release {
namespace {

std::string value_name(const CLI::Option& opt) {
  // A flag expects no items; anything else shows its type ("TEXT", "INT").
  if (opt.get_items_expected_max() == 0) return "";
  std::string text = opt.get_type_name();
  return text.empty() ? "VALUE" : text;
}

}  // namespace

CommandDoc describe(const CLI::App& app, const std::string& name) {
  CommandDoc doc;
  doc.name = name;
  doc.description = app.get_description();
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    if (opt->nonpositional()) {
      OptionDoc o;
      for (const auto& s : opt->get_snames()) o.names.push_back("-" + s);
      for (const auto& l : opt->get_lnames()) o.names.push_back("--" + l);
      o.value_name = value_name(*opt);
      o.description = opt->get_description();
      doc.options.push_back(std::move(o));
    } else {
      PositionalDoc p;
      p.name = opt->get_name();
      p.description = opt->get_description();
      p.required = opt->get_required();
      p.repeats = opt->get_items_expected_max() > 1;
      doc.positionals.push_back(std::move(p));
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) continue;  // hidden
    doc.subcommands.push_back(describe(*sub, sub->get_name()));
  }
  return doc;
}

namespace {

void walk(const CommandDoc& c, const std::string& words, std::vector<CommandPath>& out) {
  out.push_back({words, &c});
  for (const auto& sub : c.subcommands) walk(sub, words + " " + sub.name, out);
}

}  // namespace

std::vector<CommandPath> command_paths(const CommandDoc& root) {
  std::vector<CommandPath> out;
  walk(root, root.name, out);
  return out;
}

}  // namespace yonder::release
