// Finding a stored row by its id or a unique start of it, as `yonder`
// commands take ids (mesh jobs, arrays).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace yonder::mesh {

struct IdNoun {
  const char* a;     // "a mesh job"
  const char* noun;  // "mesh job"
  const char* hint;  // "`yonder mesh jobs` lists them"
};

// `rows` have an `id`. An exact match wins; a prefix must be unique.
template <typename Row>
Result<Row> find_by_id_prefix(std::vector<Row> rows, const std::string& id_or_prefix, const IdNoun& what) {
  std::optional<Row> found;
  for (auto& r : rows) {
    if (r.id.compare(0, id_or_prefix.size(), id_or_prefix) != 0) continue;
    if (r.id == id_or_prefix) return std::move(r);
    if (found) {
      return make_error(ErrorCode::kInvalidArgument,
                        "\"" + id_or_prefix + "\" names more than one " + what.noun + "; give more of the id");
    }
    found = std::move(r);
  }
  if (!found) {
    return make_error(ErrorCode::kNotFound,
                      std::string("no ") + what.noun + " " + id_or_prefix + " here; " + what.hint);
  }
  return std::move(*found);
}

// The id a command was given: refused when empty or too long to be one.
inline Status check_id_arg(const std::string& id_or_prefix, const IdNoun& what) {
  if (id_or_prefix.empty() || id_or_prefix.size() > 64) {
    return make_error(ErrorCode::kInvalidArgument, std::string("give ") + what.a + " id (or the start of one)");
  }
  return ok_status();
}

}  // namespace yonder::mesh
