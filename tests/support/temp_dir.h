// A temporary folder for a test, removed with everything in it at the end.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace yonder::testing {

class TempDir {
 public:
  TempDir() {
    // Short path: unix socket paths are limited to 107 bytes.
    char tmpl[] = "/tmp/yt-XXXXXX";
    char* p = ::mkdtemp(tmpl);
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace yonder::testing
