// A file's whole content as text ("" when it cannot be read): what a test
// reads back of what a job or a command wrote.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace yonder::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace yonder::testing
