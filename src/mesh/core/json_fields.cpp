#include "mesh/core/json_fields.h"

namespace yonder::mesh::detail {

Error bad(std::string_view what, std::string_view field) {
  return make_error(ErrorCode::kInvalidArgument,
                    "malformed " + std::string(what) + ": " + std::string(field) +
                        "; the sender runs an incompatible or faulty Yonder, ask its owner to update");
}

Result<json> parse_object(std::string_view text, size_t max_bytes, std::string_view what) {
  if (text.size() > max_bytes) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string(what) + " is larger than " + std::to_string(max_bytes) + " bytes; it was dropped");
  }
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad(what, "not a JSON object");
  return j;
}

bool printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool token_chars(std::string_view s, bool allow_equals) {
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '/' || c == ':' || (allow_equals && c == '=');
    if (!ok) return false;
  }
  return true;
}

const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

Result<std::string> get_string(const json& j, const char* key, size_t min_len, size_t max_len, std::string_view what) {
  const json* f = find(j, key);
  if (f == nullptr || !f->is_string()) return bad(what, std::string("\"") + key + "\" must be a string");
  const auto& s = f->get_ref<const std::string&>();
  if (s.size() < min_len || s.size() > max_len || !printable(s)) {
    return bad(what, std::string("\"") + key + "\" must be " + std::to_string(min_len) + ".." +
                         std::to_string(max_len) + " printable ASCII characters");
  }
  return s;
}

Result<uint64_t> get_uint(const json& j, const char* key, uint64_t max, std::string_view what) {
  const json* f = find(j, key);
  if (f == nullptr || !f->is_number_unsigned() || f->get<uint64_t>() > max) {
    return bad(what, std::string("\"") + key + "\" must be an integer in 0.." + std::to_string(max));
  }
  return f->get<uint64_t>();
}

Result<UnixMs> get_time(const json& j, const char* key, std::string_view what) {
  MESH_GET(v, get_uint(j, key, static_cast<uint64_t>(kMaxUnixMs), what));
  return static_cast<UnixMs>(v);
}

Result<bool> get_bool(const json& j, const char* key, std::string_view what) {
  const json* f = find(j, key);
  if (f == nullptr || !f->is_boolean()) return bad(what, std::string("\"") + key + "\" must be true or false");
  return f->get<bool>();
}

Result<PeerKey> get_peer(const json& j, const char* key, std::string_view what) {
  MESH_GET(s, get_string(j, key, 1, NodeId::kMaxInputLength, what));
  auto id = NodeId::parse(s);
  if (!id) return bad(what, std::string("\"") + key + "\" is not a node id");
  return id->public_key();
}

Result<Bytes> get_signature(const json& j, const char* key, std::string_view what) {
  MESH_GET(s, get_string(j, key, 88, 88, what));
  auto b = base64_decode(s);
  if (!b || b->size() != 64) return bad(what, std::string("\"") + key + "\" must be a base64 Ed25519 signature");
  return *b;
}

bool is_hash(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> get_hash(const json& j, const char* key, std::string_view what) {
  MESH_GET(s, get_string(j, key, 64, 64, what));
  if (!is_hash(s)) return bad(what, std::string("\"") + key + "\" must be 64 lower-case hex digits");
  return s;
}

Result<std::map<std::string, std::string>> get_labels(const json& j, const char* key, std::string_view what) {
  std::map<std::string, std::string> out;
  const json* f = find(j, key);
  if (f == nullptr) return out;
  if (!f->is_object() || f->size() > kMaxLabels) {
    return bad(what,
               std::string("\"") + key + "\" must be an object of at most " + std::to_string(kMaxLabels) + " labels");
  }
  for (auto it = f->begin(); it != f->end(); ++it) {
    const std::string& k = it.key();
    if (k.empty() || k.size() > kMaxLabelKey || !token_chars(k, false) || !it->is_string()) {
      return bad(what, "a label key must be 1..63 of [A-Za-z0-9._/:-] with a string value");
    }
    const auto& v = it->get_ref<const std::string&>();
    if (v.size() > kMaxLabelValue || !token_chars(v, true)) {
      return bad(what, "a label value must be at most 63 of [A-Za-z0-9._/:=-]");
    }
    out.emplace(k, v);
  }
  return out;
}

std::string peer_text(const PeerKey& k) {
  return NodeId(k).to_string();
}

json labels_json(const std::map<std::string, std::string>& labels) {
  json o = json::object();
  for (const auto& [k, v] : labels) o[k] = v;
  return o;
}

Bytes signing_bytes(std::string_view label, const json& unsigned_fields) {
  std::string s(label);
  s += '\n';
  s += unsigned_fields.dump();
  return Bytes(s.begin(), s.end());
}

}  // namespace yonder::mesh::detail
