#include "os/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace yonder::os {

Status make_dirs(const std::string& path, unsigned mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return make_error(ErrorCode::kPermissionDenied, "cannot create folder " + part + ": " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::kFailedPrecondition, path + " is not a folder");
  }
  return ok_status();
}

Status write_file_atomically(const std::string& path, std::string_view text, unsigned mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return make_error(ErrorCode::kPermissionDenied, "cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = ok ? errno : err;
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::kResourceExhausted, "cannot write " + path + ": " + std::strerror(why));
  }
  return ok_status();
}

Status make_dirs_beneath(const std::string& root, const std::string& relative, unsigned mode, int uid, int gid) {
  int dir = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    return make_error(ErrorCode::kFailedPrecondition, "cannot open folder " + root + ": " + std::strerror(errno));
  }
  std::string done;  // the components made or found so far, for messages
  size_t start = 0;
  Status result = ok_status();
  while (start <= relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string::npos) slash = relative.size();
    std::string part = relative.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    done += (done.empty() ? "" : "/") + part;
    if (part == "..") {
      result = make_error(ErrorCode::kInvalidArgument, "\"" + relative + "\" must not contain \"..\"");
      break;
    }
    bool made = ::mkdirat(dir, part.c_str(), mode) == 0;
    if (!made && errno != EEXIST) {
      result = make_error(ErrorCode::kFailedPrecondition, "cannot create folder " + done + ": " + std::strerror(errno));
      break;
    }
    int next = ::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int e = errno;
      std::string why = e == ELOOP || e == ENOTDIR ? std::string() : std::string(" (") + std::strerror(e) + ")";
      result = make_error(ErrorCode::kFailedPrecondition, done + " exists and is not a folder" + why);
      break;
    }
    ::close(dir);
    dir = next;
    if (made && ::fchown(dir, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
      result = make_error(ErrorCode::kPermissionDenied,
                          "cannot give folder " + done + " to its owner: " + std::strerror(errno));
      break;
    }
  }
  ::close(dir);
  return result;
}

Result<FileLock> FileLock::acquire(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(ErrorCode::kPermissionDenied, "cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return make_error(ErrorCode::kAlreadyExists, "another yonderd is already running for this state folder (" + path +
                                                     " is locked); stop it first, or set YONDER_HOME to another folder");
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return "";
}

}  // namespace yonder::os
