#include "release/completion.h"

#include <algorithm>

namespace yonder::release {
namespace {

// Names are identifiers chosen by us (subcommands, options); descriptions
// are free text and get quoted for each shell.
std::string single_quoted_sh(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string single_quoted_fish(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string first_line(std::string_view s) {
  auto nl = s.find('\n');
  return std::string(nl == std::string_view::npos ? s : s.substr(0, nl));
}

std::string function_name(const CommandDoc& root) {
  std::string out = "_";
  for (char c : root.name) out += (c == '-' ? '_' : c);
  return out;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

std::vector<std::string> option_names(const CommandDoc& c, bool with_value) {
  std::vector<std::string> out;
  for (const auto& o : c.options) {
    if (!o.value_name.empty() != with_value) continue;
    out.insert(out.end(), o.names.begin(), o.names.end());
  }
  return out;
}

std::vector<std::string> sub_names(const CommandDoc& c) {
  std::vector<std::string> out;
  for (const auto& s : c.subcommands) out.push_back(s.name);
  return out;
}

// The case labels that turn "path word" into the deeper path.
std::string subcommand_case_labels(const std::vector<CommandPath>& paths) {
  std::string out;
  for (size_t i = 1; i < paths.size(); ++i) {
    if (!out.empty()) out += '|';
    out += '"' + paths[i].words + '"';
  }
  return out;
}

std::string bash(const CommandDoc& root) {
  auto paths = command_paths(root);
  std::string fn = function_name(root);
  std::string s = "# bash completion for " + root.name + "; generated from its command-line definition.\n";
  s += fn + "() {\n";
  s += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  s += "  local cmdpath=" + single_quoted_sh(root.name) + " w i skip=0 subs opts vopts\n";
  // One table lookup, used both while walking the words and at the cursor.
  s += "  _" + fn + "_table() {\n    case \"$1\" in\n";
  for (const auto& p : paths) {
    s += "      " + single_quoted_sh(p.words) + ") subs=" + single_quoted_sh(join_words(sub_names(*p.command))) +
         "; opts=" + single_quoted_sh(join_words(option_names(*p.command, false))) +
         "; vopts=" + single_quoted_sh(join_words(option_names(*p.command, true))) + " ;;\n";
  }
  s += "      *) subs=''; opts=''; vopts='' ;;\n    esac\n  }\n";
  s += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
  s += "    w=\"${COMP_WORDS[i]}\"\n";
  s += "    if ((skip)); then skip=0; continue; fi\n";
  s += "    [[ $w == -- ]] && return 0\n";
  s += "    if [[ $w == -* ]]; then\n";
  s += "      _" + fn + "_table \"$cmdpath\"\n";
  s += "      [[ $w != *=* && \" $vopts \" == *\" $w \"* ]] && skip=1\n";
  s += "      continue\n    fi\n";
  if (paths.size() > 1) {
    s += "    case \"$cmdpath $w\" in\n      " + subcommand_case_labels(paths) +
         ") cmdpath=\"$cmdpath $w\" ;;\n    esac\n";
  }
  s += "  done\n";
  s += "  _" + fn + "_table \"$cmdpath\"\n";
  s += "  if [[ \" $vopts \" == *\" $prev \"* ]]; then\n";
  s += "    COMPREPLY=($(compgen -f -- \"$cur\"))\n    return 0\n  fi\n";
  s += "  if [[ $cur == -* ]]; then\n";
  s += "    COMPREPLY=($(compgen -W \"$opts $vopts\" -- \"$cur\"))\n";
  s += "  elif [[ -n $subs ]]; then\n";
  s += "    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n";
  s += "  else\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n";
  s += "}\n";
  s += "complete -o filenames -F " + fn + " " + root.name + "\n";
  return s;
}

// zsh: a _describe list per command path; `cmdpath` (not `path`: that is
// zsh's array view of $PATH) is found the way the bash script finds it.
std::string zsh_item(std::string_view name, std::string_view description) {
  std::string item;
  for (char c : name) {
    if (c == ':') item += '\\';
    item += c;
  }
  return single_quoted_sh(item + ":" + first_line(description));
}

std::string zsh(const CommandDoc& root) {
  auto paths = command_paths(root);
  std::string fn = function_name(root);
  std::string s = "#compdef " + root.name + "\n# zsh completion for " + root.name +
                  "; generated from its command-line definition.\n";
  s += fn + "() {\n";
  s += "  local cmdpath=" + single_quoted_sh(root.name) + " w i skip=0\n";
  s += "  local -a subs opts vopts\n";
  s += "  " + fn + "_table() {\n    subs=(); opts=(); vopts=()\n    case \"$1\" in\n";
  for (const auto& p : paths) {
    s += "      (" + single_quoted_sh(p.words) + ")\n";
    std::string subs, opts, vopts;
    for (const auto& sub : p.command->subcommands) subs += " " + zsh_item(sub.name, sub.description);
    for (const auto& o : p.command->options) {
      for (const auto& n : o.names) {
        opts += " " + zsh_item(n, o.description);
        if (!o.value_name.empty()) vopts += " " + single_quoted_sh(n);
      }
    }
    s += "        subs=(" + subs + " )\n        opts=(" + opts + " )\n        vopts=(" + vopts + " ) ;;\n";
  }
  s += "    esac\n  }\n";
  s += "  for ((i = 2; i < CURRENT; i++)); do\n";
  s += "    w=${words[i]}\n";
  s += "    if ((skip)); then skip=0; continue; fi\n";
  s += "    [[ $w == -- ]] && { _files; return }\n";
  s += "    if [[ $w == -* ]]; then\n";
  s += "      " + fn + "_table \"$cmdpath\"\n";
  s += "      [[ $w != *=* ]] && ((${vopts[(Ie)$w]})) && skip=1\n";
  s += "      continue\n    fi\n";
  if (paths.size() > 1) {
    s += "    case \"$cmdpath $w\" in\n      (" + subcommand_case_labels(paths) +
         ") cmdpath=\"$cmdpath $w\" ;;\n    esac\n";
  }
  s += "  done\n";
  s += "  " + fn + "_table \"$cmdpath\"\n";
  s += "  if ((${vopts[(Ie)${words[CURRENT-1]}]})); then _files; return; fi\n";
  s += "  if [[ ${words[CURRENT]} == -* ]]; then\n";
  s += "    _describe -t options option opts\n";
  s += "  elif ((${#subs})); then\n";
  s += "    _describe -t commands command subs\n";
  s += "  else\n    _files\n  fi\n";
  s += "}\n";
  s += "if [[ $funcstack[1] == " + fn + " ]]; then " + fn + " \"$@\"; else compdef " + fn + " " + root.name + "; fi\n";
  return s;
}

std::string fish(const CommandDoc& root) {
  auto paths = command_paths(root);
  std::string fn = "__" + function_name(root).substr(1) + "_path";
  std::string s = "# fish completion for " + root.name + "; generated from its command-line definition.\n";
  // The command path typed so far ("yonder config"), skipping options and
  // the values of options that take one.
  s += "function " + fn + "\n";
  s += "    set -l words (commandline -opc)\n";
  s += "    set -l p " + single_quoted_fish(root.name) + "\n";
  s += "    set -l skip 0\n";
  s += "    for w in $words[2..-1]\n";
  s += "        if test $skip = 1\n            set skip 0\n            continue\n        end\n";
  s += "        switch $w\n";
  s += "            case '--'\n                echo -- \"$p --\"\n                return\n";
  s += "            case '-*'\n";
  s += "                if not string match -q -- '*=*' $w; and contains -- \"$p $w\" $" + fn + "_vopts\n";
  s += "                    set skip 1\n                end\n";
  s += "            case '*'\n";
  s += "                if contains -- \"$p $w\" $" + fn +
       "_cmds\n                    set p \"$p $w\"\n                end\n";
  s += "        end\n    end\n    echo -- $p\nend\n";
  std::vector<std::string> cmds, vopts;
  for (size_t i = 1; i < paths.size(); ++i) cmds.push_back(single_quoted_fish(paths[i].words));
  for (const auto& p : paths) {
    for (const auto& o : p.command->options) {
      if (o.value_name.empty()) continue;
      for (const auto& n : o.names) vopts.push_back(single_quoted_fish(p.words + " " + n));
    }
  }
  s += "set -g " + fn + "_cmds " + join_words(cmds) + "\n";
  s += "set -g " + fn + "_vopts " + join_words(vopts) + "\n";
  s += "complete -c " + root.name + " -e\n";
  for (const auto& p : paths) {
    std::string cond = "-n " + single_quoted_fish("test (" + fn + ") = " + single_quoted_fish(p.words));
    bool takes_args = !p.command->positionals.empty();
    if (!takes_args) s += "complete -c " + root.name + " " + cond + " -f\n";
    for (const auto& sub : p.command->subcommands) {
      s += "complete -c " + root.name + " " + cond + " -f -a " + single_quoted_fish(sub.name) + " -d " +
           single_quoted_fish(first_line(sub.description)) + "\n";
    }
    for (const auto& o : p.command->options) {
      std::string flags;
      for (const auto& n : o.names) {
        if (n.size() > 2 && n[1] == '-') {
          flags += " -l " + single_quoted_fish(n.substr(2));
        } else {
          flags += " -s " + single_quoted_fish(n.substr(1));
        }
      }
      if (!o.value_name.empty()) flags += " -r";
      s += "complete -c " + root.name + " " + cond + flags + " -d " + single_quoted_fish(first_line(o.description)) +
           "\n";
    }
  }
  return s;
}

}  // namespace

std::optional<Shell> parse_shell(std::string_view name) {
  if (name == "bash") return Shell::kBash;
  if (name == "zsh") return Shell::kZsh;
  if (name == "fish") return Shell::kFish;
  return std::nullopt;
}

std::string completion_script(const CommandDoc& root, Shell shell) {
  switch (shell) {
    case Shell::kBash: return bash(root);
    case Shell::kZsh: return zsh(root);
    case Shell::kFish: return fish(root);
  }
  return {};
}

}  // namespace yonder::release
