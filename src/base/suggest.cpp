#include "base/suggest.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace yonder {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows: bounded by the inputs, which
  // callers keep short (names, commands).
  const size_t n = a.size(), m = b.size();
  std::vector<size_t> before(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty() || word.size() > 256) return "";
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  size_t best = std::numeric_limits<size_t>::max();
  std::string found;
  bool tie = false;
  for (const auto& c : candidates) {
    if (c.size() > 256 || c == word) continue;
    size_t d = edit_distance(word, c);
    bool prefix = word.size() >= 4 && c.size() > word.size() && edit_distance(word, c.substr(0, word.size())) == 0;
    if (prefix) d = std::min(d, allowed);
    if (d > allowed) continue;
    if (d < best) {
      best = d;
      found = c;
      tie = false;
    } else if (d == best && c != found) {
      tie = true;
    }
  }
  return tie ? "" : found;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = closest_match(word, candidates);
  return m.empty() ? "" : "; did you mean `" + m + "`?";
}

}  // namespace yonder
