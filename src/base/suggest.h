// "Did you mean": the known word closest to a mistyped one (a command, a
// setting, a peer's name), for error messages that name the fix. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace yonder {

// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`,
// case-insensitively.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a typo (at
// most one edit per three characters, at least one; a candidate that
// starts with `word`, a prefix of four or more characters, also counts);
// "" when none is, or when two are equally close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean `x`?" for the closest match, or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace yonder
