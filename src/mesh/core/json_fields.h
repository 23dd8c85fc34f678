// Internal to src/mesh: the bounded, non-throwing JSON field readers every
// mesh codec uses. Strings are printable ASCII only (0x20..0x7e) so that
// dumping a decoded value can never throw on bad UTF-8 and the canonical
// form is the same on every node.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "mesh/core/types.h"

namespace yonder::mesh::detail {

using nlohmann::json;

Error bad(std::string_view what, std::string_view field);

// Parses `text` (at most `max_bytes`) into a JSON object.
Result<json> parse_object(std::string_view text, size_t max_bytes, std::string_view what);

bool printable(std::string_view s);
// Label keys and values, backend names: [A-Za-z0-9._/:-], and = too when allow_equals.
bool token_chars(std::string_view s, bool allow_equals);

const json* find(const json& j, const char* key);
Result<std::string> get_string(const json& j, const char* key, size_t min_len, size_t max_len, std::string_view what);
Result<uint64_t> get_uint(const json& j, const char* key, uint64_t max, std::string_view what);
Result<UnixMs> get_time(const json& j, const char* key, std::string_view what);
Result<bool> get_bool(const json& j, const char* key, std::string_view what);
Result<PeerKey> get_peer(const json& j, const char* key, std::string_view what);
Result<Bytes> get_signature(const json& j, const char* key, std::string_view what);
// A 32-byte SHA-256 as 64 lower-case hex digits.
Result<std::string> get_hash(const json& j, const char* key, std::string_view what);
Result<std::map<std::string, std::string>> get_labels(const json& j, const char* key, std::string_view what);

std::string peer_text(const PeerKey& k);
json labels_json(const std::map<std::string, std::string>& labels);
// label + "\n" + canonical dump of `unsigned_fields`.
Bytes signing_bytes(std::string_view label, const json& unsigned_fields);
bool is_hash(std::string_view s);

inline constexpr size_t kMaxLabels = 32;
inline constexpr size_t kMaxLabelKey = 63;
inline constexpr size_t kMaxLabelValue = 63;

}  // namespace yonder::mesh::detail

// Assigns the value of a Result expression to `var` or returns its error.
#define MESH_GET(var, expr)                               \
  auto var##_r_ = (expr);                                 \
  if (!var##_r_.ok()) return std::move(var##_r_).error(); \
  auto var = std::move(var##_r_).value()
