// A temporary folder for a test, removed with everything in it at the end.
#pragma once

#include <stdlib.h>
#include <sys/mount.h>

#include <algorithm>
#include <fstream>
#include <vector>

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
    // Job workspaces are loop-mounted file systems; a test that ends with a
    // daemon's jobs still mounted must not leave them behind.
    unmount_below(path_);
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  static void unmount_below(const std::string& dir) {
    std::ifstream mounts("/proc/self/mounts");
    std::string device, point, rest;
    std::vector<std::string> points;
    while (mounts >> device >> point && std::getline(mounts, rest)) {
      if (point.rfind(dir + "/", 0) == 0) points.push_back(point);
    }
    // Deepest first.
    std::sort(points.rbegin(), points.rend());
    for (const auto& p : points) ::umount2(p.c_str(), MNT_DETACH);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace yonder::testing
