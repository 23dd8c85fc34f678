#include "relay/path_hint.h"

#include <arpa/inet.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "relay/protocol.h"

namespace yonder::relay {
namespace {

// "a.b.c.d:port", port 1-65535: a public IPv4 endpoint as a router maps it.
bool valid_endpoint(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || text.size() > 21) return false;
  std::string host = text.substr(0, colon);
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  unsigned port = 0;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, port);
  return ec == std::errc() && end == last && first != last && port >= 1 && port <= 65535;
}

}  // namespace

Bytes encode_path_hint(const PathHint& hint) {
  nlohmann::json j = {{"v", 1}};
  if (hint.mapped) j["mapped"] = *hint.mapped;
  std::string s = j.dump();
  return Bytes(s.begin(), s.end());
}

Result<PathHint> decode_path_hint(ByteView bytes) {
  if (bytes.size() > kMaxSignalBytes) return make_error(ErrorCode::kInvalidArgument, "path hint too large");
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "path hint is not a JSON object");
  auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != 1) {
    return make_error(ErrorCode::kInvalidArgument, "path hint of an unknown version");
  }
  PathHint hint;
  if (auto m = j.find("mapped"); m != j.end()) {
    if (!m->is_string() || !valid_endpoint(m->get_ref<const std::string&>())) {
      return make_error(ErrorCode::kInvalidArgument, "path hint: \"mapped\" must be IPv4:PORT");
    }
    hint.mapped = m->get<std::string>();
  }
  return hint;
}

}  // namespace yonder::relay
