// Strings a peer chose reach the terminal only through shown()
// (cli/shown.h): this reads the CLI's sources and fails on a peer-named
// field printed another way.
#include "cli/shown.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace yonder::cli {
namespace {

TEST(Shown, AProvidersNameIsEscapedWhenPrinted) {
  nlohmann::json peer = {{"name", "ev\x1b]52;c;ZXZpbA==\x07\x1b[2Jil"}};
  EXPECT_EQ(shown(peer, "name", "?"), "ev\\e]52;c;ZXZpbA==\\x07\\e[2Jil");
  EXPECT_EQ(shown(peer, "missing", "?"), "?");
  EXPECT_EQ(shown(nlohmann::json{{"name", 3}}, "name", "?"), "?");
}

TEST(Shown, TheCliPrintsPeerNamedFieldsOnlyThroughShown) {
  // The fields whose text a peer (provider, group member, job) chooses.
  std::regex raw(R"(value\("(name|provider_name|peer_name|summary|reason)\")");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(YONDER_SOURCE_DIR) + "/src/cli")) {
    if (e.path().extension() != ".cpp") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      EXPECT_FALSE(std::regex_search(line, raw)) << e.path().filename().string() << ":" << n << ": " << line;
    }
  }
  EXPECT_GT(files, 10);  // the sources were found
}

}  // namespace
}  // namespace yonder::cli
