#include "release/man_page.h"

#include <algorithm>
#include <cctype>

namespace yonder::release {

std::string roff_escape(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

namespace {

std::string upper(const std::string& s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Free text: blank lines become paragraph breaks, other newlines spaces.
std::string paragraphs(const std::string& text) {
  std::string out;
  std::string line;
  auto flush_line = [&] {
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += roff_escape(line);
    line.clear();
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string part = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (part.empty()) {
      if (!line.empty()) flush_line();
      out += "\n.PP\n";
    } else {
      if (!line.empty()) line += ' ';
      line += part;
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (!line.empty()) flush_line();
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

std::string option_label(const OptionDoc& o) {
  std::string s;
  for (const auto& n : o.names) {
    if (!s.empty()) s += ", ";
    s += "\\fB" + roff_escape(n) + "\\fR";
  }
  if (!o.value_name.empty()) s += " \\fI" + roff_escape(o.value_name) + "\\fR";
  return s;
}

std::string positional_label(const PositionalDoc& p) {
  std::string s = "\\fI" + roff_escape(upper(p.name)) + "\\fR";
  if (p.repeats) s += "...";
  return p.required ? s : "[" + s + "]";
}

std::string usage(const std::string& words, const CommandDoc& c) {
  std::string s = ".B " + roff_escape(words) + "\n";
  std::string rest;
  if (!c.options.empty()) rest += "[\\fIOPTIONS\\fR]";
  if (!c.subcommands.empty()) rest += std::string(rest.empty() ? "" : " ") + "\\fICOMMAND\\fR";
  for (const auto& p : c.positionals) rest += std::string(rest.empty() ? "" : " ") + positional_label(p);
  if (!rest.empty()) s += rest + "\n";
  return s;
}

// `with_help`: -h/--help is listed once, at the root, not under every command.
void options_list(const CommandDoc& c, std::string& out, bool with_help) {
  for (const auto& p : c.positionals) {
    out += ".TP\n" + positional_label(p) + "\n" + roff_escape(p.description) + "\n";
  }
  for (const auto& o : c.options) {
    if (!with_help && std::find(o.names.begin(), o.names.end(), "--help") != o.names.end()) continue;
    out += ".TP\n" + option_label(o) + "\n" + roff_escape(o.description) + "\n";
  }
}

}  // namespace

std::string man_page(const CommandDoc& root, const ManPageInfo& info) {
  std::string s;
  s += ".\\\" Generated from " + root.name + "'s command-line definition (src/release/man_page.cpp); do not edit.\n";
  s += ".TH " + upper(root.name) + " " + std::to_string(info.section) + " \"\" \"" + roff_escape(info.version) +
       "\" \"" + (info.section == 8 ? "System Administration" : "User Commands") + "\"\n";
  s += ".SH NAME\n" + roff_escape(root.name) + " \\- " + roff_escape(info.summary) + "\n";
  s += ".SH SYNOPSIS\n" + usage(root.name, root);
  s += ".SH DESCRIPTION\n" + paragraphs(root.description);
  if (!root.options.empty() || !root.positionals.empty()) {
    s += ".SH OPTIONS\n";
    options_list(root, s, true);
  }
  auto paths = command_paths(root);
  if (paths.size() > 1) {
    s += ".SH COMMANDS\n";
    for (size_t i = 1; i < paths.size(); ++i) {
      const CommandDoc& c = *paths[i].command;
      s += ".SS \"" + roff_escape(paths[i].words) + "\"\n";
      s += paragraphs(c.description);
      s += ".PP\n" + usage(paths[i].words, c);
      options_list(c, s, false);
    }
  }
  for (const auto& extra : info.extra) s += ".SH " + upper(extra.title) + "\n" + paragraphs(extra.text);
  if (!info.see_also.empty()) {
    s += ".SH SEE ALSO\n";
    for (size_t i = 0; i < info.see_also.size(); ++i) {
      const std::string& ref = info.see_also[i];
      auto paren = ref.find('(');
      s += ".BR " + roff_escape(ref.substr(0, paren)) + " " +
           ref.substr(paren == std::string::npos ? ref.size() : paren) + (i + 1 < info.see_also.size() ? "," : "") +
           "\n";
    }
  }
  return s;
}

}  // namespace yonder::release
