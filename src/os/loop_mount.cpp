#include "os/loop_mount.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "os/files.h"
#include "os/process.h"

namespace yonder::os {
namespace {

std::string first_line(const std::string& text) {
  auto nl = text.find('\n');
  return text.substr(0, nl == std::string::npos ? 300 : std::min<size_t>(nl, 300));
}

Status run_tool(std::vector<std::string> argv, const std::string& purpose) {
  // Daemons started by a user may lack the sbin folders on PATH.
  if (find_in_path(argv[0]).empty()) {
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
      if (::access((dir + argv[0]).c_str(), X_OK) == 0) {
        argv[0] = dir + argv[0];
        break;
      }
    }
  }
  auto r = run_capture(argv, std::chrono::seconds(60));
  if (!r) {
    return make_error(r.error().code(), purpose + ": " + argv[0] + " is not installed (" + r.error().message() +
                                            "); install e2fsprogs and mount (Debian: apt-get install e2fsprogs mount)");
  }
  if (r->exit_code != 0) {
    std::string hint = ::geteuid() == 0 ? "" : " (loop mounts need root)";
    return make_error(ErrorCode::kInternal, purpose + ": " + argv[0] + " failed: " + first_line(r->output) + hint);
  }
  return ok_status();
}

// Unescapes the octal escapes (\040 for a space) of /proc/self/mountinfo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out.push_back(static_cast<char>(v));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Status create_ext4_image(const std::string& image, int64_t bytes, int uid, int gid) {
  if (bytes < (4 << 20)) {
    return make_error(ErrorCode::kInvalidArgument, "a workspace must be at least 4 MiB, not " + std::to_string(bytes) + " bytes");
  }
  int fd = ::open(image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    return make_error(e == EEXIST ? ErrorCode::kAlreadyExists : ErrorCode::kInternal,
                      "creating workspace image " + image + ": " + std::strerror(e));
  }
  int rc = ::ftruncate(fd, bytes);
  int e = errno;
  ::close(fd);
  if (rc != 0) {
    ::unlink(image.c_str());
    return make_error(ErrorCode::kResourceExhausted, "sizing workspace image " + image + ": " + std::strerror(e));
  }
  auto st = run_tool({"mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                      "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid) +
                          ",lazy_itable_init=1,lazy_journal_init=1",
                      image},
                     "formatting workspace image " + image);
  if (!st) ::unlink(image.c_str());
  return st;
}

Status mount_loop(const std::string& image, const std::string& dir) {
  YONDER_TRY(make_dirs(dir, 0700));
  return run_tool({"mount", "-t", "ext4", "-o", "loop,nosuid,nodev", image, dir}, "mounting workspace " + image);
}

Status unmount(const std::string& dir) {
  if (!is_mount_point(dir)) return ok_status();
  return run_tool({"umount", dir}, "unmounting workspace " + dir);
}

bool is_mount_point(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    if (fields >> id >> parent >> devno >> root >> mount_point) {
      if (unescape(mount_point) == dir) return true;
    }
  }
  return false;
}

}  // namespace yonder::os
