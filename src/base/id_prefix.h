// Finding a stored row by its id or a unique start of it, as `yonder`
// commands take ids (mesh jobs, arrays, share links), the way git and
// docker take a short id. Pure.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace yonder {

struct IdNoun {
  const char* a;     // "a mesh job"
  const char* noun;  // "mesh job"
  const char* hint;  // "`yonder mesh jobs` lists them"
};

// The shortest start of an id that is still an id here: shorter prefixes
// match too much to be worth guessing from.
inline constexpr size_t kMinIdPrefix = 4;

// `rows` have an `id`. An exact match wins; a prefix must be at least
// kMinIdPrefix characters and unique. When it is not, the error says how
// many characters tell the matching ids apart.
template <typename Row>
Result<Row> find_by_id_prefix(std::vector<Row> rows, const std::string& id_or_prefix, const IdNoun& what) {
  std::vector<size_t> hits;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& id = rows[i].id;
    if (id.compare(0, id_or_prefix.size(), id_or_prefix) != 0) continue;
    if (id == id_or_prefix) return std::move(rows[i]);
    hits.push_back(i);
  }
  if (hits.empty()) {
    return make_error(ErrorCode::kNotFound, std::string("no ") + what.noun + " " + id_or_prefix + " here; " + what.hint);
  }
  if (id_or_prefix.size() < kMinIdPrefix) {
    return make_error(ErrorCode::kInvalidArgument, "\"" + id_or_prefix + "\" is too short to name " + what.a +
                                                       ": give at least " + std::to_string(kMinIdPrefix) +
                                                       " characters of its id; " + what.hint);
  }
  if (hits.size() > 1) {
    // Two ids that share their first k characters need k + 1 to tell apart.
    std::vector<std::string> ids;
    for (size_t i : hits) ids.push_back(rows[i].id);
    std::sort(ids.begin(), ids.end());
    size_t needed = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      size_t k = 0;
      while (k < ids[i].size() && k < ids[i - 1].size() && ids[i][k] == ids[i - 1][k]) ++k;
      needed = std::max(needed, k + 1);
    }
    return make_error(ErrorCode::kInvalidArgument, "\"" + id_or_prefix + "\" names " + std::to_string(hits.size()) +
                                                       " " + what.noun + "s; give at least " + std::to_string(needed) +
                                                       " characters of the id; " + what.hint);
  }
  return std::move(rows[hits.front()]);
}

// The id a command was given: refused when empty or too long to be one.
inline Status check_id_arg(const std::string& id_or_prefix, const IdNoun& what) {
  if (id_or_prefix.empty() || id_or_prefix.size() > 64) {
    return make_error(ErrorCode::kInvalidArgument, std::string("give ") + what.a + " id (or the start of one)");
  }
  return ok_status();
}

}  // namespace yonder
