#include "transfer/ignore_rules.h"

#include <fnmatch.h>

namespace yonder::transfer {

void IgnoreRules::add(std::string_view text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string line(text.substr(start, nl - start));
    start = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    Rule r;
    if (line[0] == '!') {
      r.negate = true;
      line.erase(0, 1);
    } else if (line[0] == '\\') {
      line.erase(0, 1);
    }
    if (!line.empty() && line.back() == '/') {
      r.dir_only = true;
      line.pop_back();
    }
    if (!line.empty() && line[0] == '/') {
      r.anchored = true;
      line.erase(0, 1);
    }
    if (line.find('/') != std::string::npos) r.anchored = true;
    if (line.empty() || line.size() > 4096) continue;
    r.pattern = std::move(line);
    rules_.push_back(std::move(r));
  }
}

bool IgnoreRules::ignored(std::string_view path, bool is_dir) const {
  std::string full(path);
  size_t slash = full.rfind('/');
  std::string name = slash == std::string::npos ? full : full.substr(slash + 1);
  if (name == ".git") return true;
  bool out = false;
  for (const Rule& r : rules_) {
    if (r.dir_only && !is_dir) continue;
    const std::string& subject = r.anchored ? full : name;
    int flags = r.anchored ? FNM_PATHNAME : 0;
    if (::fnmatch(r.pattern.c_str(), subject.c_str(), flags) == 0) out = !r.negate;
  }
  return out;
}

}  // namespace yonder::transfer
