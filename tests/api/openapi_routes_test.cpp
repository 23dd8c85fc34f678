// docs/openapi.yaml documents every route yonderd registers, and nothing
// else: each `router.add("METHOD", "/path", ...)` in src/ must appear under
// `paths:` with that method, and each documented operation must exist.
// (The running daemon's own list, GET /v1/routes, is compared with the same
// file in tests/integration/api_security_test.cpp.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using Route = std::pair<std::string, std::string>;  // (lower-case method, path)

std::string source_dir() {
  const char* d = std::getenv("YONDER_SOURCE_DIR");
  return d ? d : ".";
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A string literal starting at text[i] (after spaces); advances i past it.
bool literal(const std::string& text, size_t& i, std::string& out) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
  if (i >= text.size() || text[i] != '"') return false;
  size_t end = text.find('"', i + 1);
  if (end == std::string::npos) return false;
  out = text.substr(i + 1, end - i - 1);
  i = end + 1;
  return true;
}

std::set<Route> registered_routes() {
  std::set<Route> out;
  for (const auto& e : fs::recursive_directory_iterator(source_dir() + "/src")) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = read(e.path());
    for (size_t at = text.find(".add(\""); at != std::string::npos; at = text.find(".add(\"", at + 1)) {
      size_t i = at + 5;
      std::string method, path;
      if (!literal(text, i, method)) continue;
      while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
      if (!literal(text, i, path)) continue;
      if (method != "GET" && method != "POST" && method != "PUT" && method != "DELETE" && method != "PATCH") continue;
      if (path.empty() || path[0] != '/') continue;
      out.insert({lower(method), path});
    }
    // WebSocket routes (api/server.h) are GET routes too.
    constexpr std::string_view kWs = "add_websocket_follow(";
    for (size_t at = text.find(kWs); at != std::string::npos; at = text.find(kWs, at + 1)) {
      size_t i = text.find(',', at);
      std::string path;
      if (i == std::string::npos || !literal(text, ++i, path) || path.empty() || path[0] != '/') continue;
      out.insert({"get", path});
    }
  }
  return out;
}

// The operations under `paths:` (two-space path keys, four-space methods).
std::set<Route> documented_routes() {
  std::set<Route> out;
  std::ifstream in(source_dir() + "/docs/openapi.yaml");
  std::string line, path;
  bool in_paths = false;
  while (std::getline(in, line)) {
    if (line == "paths:") {
      in_paths = true;
      continue;
    }
    if (!in_paths || line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') break;
    if (line.rfind("  /", 0) == 0 && line.back() == ':') {
      path = line.substr(2, line.size() - 3);
    } else if (line.rfind("    ", 0) == 0 && line[4] != ' ' && line.back() == ':') {
      std::string m = line.substr(4, line.size() - 5);
      if (m == "get" || m == "post" || m == "put" || m == "delete" || m == "patch") out.insert({m, path});
    }
  }
  return out;
}

TEST(OpenApi, DocumentsEveryRegisteredRouteAndNoOthers) {
  auto registered = registered_routes();
  auto documented = documented_routes();
  ASSERT_GT(registered.size(), 30u) << "the scan of src/ found too few routes; did router.add change shape?";
  for (const auto& [method, path] : registered) {
    EXPECT_TRUE(documented.count({method, path})) << method << " " << path << " is not in docs/openapi.yaml";
  }
  for (const auto& [method, path] : documented) {
    if (path == "/login") continue;  // answered by the gate (api/auth.h), not a router route
    EXPECT_TRUE(registered.count({method, path}))
        << method << " " << path << " is in docs/openapi.yaml but no router.add registers it";
  }
}

}  // namespace
