// Which paths an upload leaves out: the patterns of `.gitignore` and
// `.yonderignore` at the root of the folder (later rules win, so
// .yonderignore, read second, can re-include with `!`). Supported: comments,
// blank lines, `!` negation, a trailing `/` (folders only), a leading or
// inner `/` (anchored at the root), and `*`, `?`, `[...]` within one path
// component (fnmatch). Not supported: `**`, and ignore files in subfolders.
// `.git` is always left out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace yonder::transfer {

class IgnoreRules {
 public:
  // Appends the rules in `text` (the content of one ignore file).
  void add(std::string_view text);
  // `path` is relative to the root, '/'-separated.
  bool ignored(std::string_view path, bool is_dir) const;
  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    std::string pattern;
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;  // matches the whole path, else the last component
  };
  std::vector<Rule> rules_;
};

}  // namespace yonder::transfer
