// The check that a pure core stays pure: its sources and every file they
// include (quoted includes under src/, followed transitively) include
// nothing banned and read no clock (no "::now(").
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace yonder::testing {

// Quoted includes of `path` under `src`, followed transitively.
inline void collect_sources(const std::string& src, const std::string& path, std::set<std::string>& seen) {
  if (!seen.insert(path).second) return;
  std::ifstream in(src + "/" + path);
  ASSERT_TRUE(in) << "cannot read " << src << "/" << path;
  std::string line;
  std::regex quoted("#include \"([^\"]+)\"");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, quoted)) collect_sources(src, m[1], seen);
  }
}

// Checks `roots` (paths under src/) and all they include against `banned`
// (substrings of an #include line); returns the files read. Empty when
// YONDER_SOURCE_DIR is unset (ctest sets it): the caller then skips.
inline std::set<std::string> check_core_purity(const std::vector<std::string>& roots,
                                                const std::vector<std::string>& banned) {
  const char* root = std::getenv("YONDER_SOURCE_DIR");
  std::set<std::string> files;
  if (root == nullptr) return files;
  std::string src = std::string(root) + "/src";
  for (const auto& r : roots) collect_sources(src, r, files);
  for (const auto& f : files) {
    std::ifstream in(src + "/" + f);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("#include", 0) == 0) {
        for (const auto& b : banned) EXPECT_EQ(line.find(b), std::string::npos) << f << ": " << line;
      }
      EXPECT_EQ(line.find("::now("), std::string::npos) << f << " reads a clock: " << line;
    }
  }
  return files;
}

}  // namespace yonder::testing
