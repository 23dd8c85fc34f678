// File-system helpers with the modes and durability Yonder needs.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::os {

// mkdir -p with `mode` for the folders it creates.
Status make_dirs(const std::string& path, unsigned mode);

// mkdir -p of `relative` ('/'-separated, no "..") inside the folder `root`,
// never following a symbolic link on the way (O_NOFOLLOW per component), so
// it cannot leave `root`. Folders it creates get `mode` and belong to
// uid:gid. kFailedPrecondition names a component that exists but is not a
// folder (or is a link).
Status make_dirs_beneath(const std::string& root, const std::string& relative, unsigned mode, int uid, int gid);

// Replaces the file `path` with `text` so that a crash leaves the old
// contents or the new, never a part: writes PATH.tmp with `mode`, syncs it
// to disk, and renames it over PATH.
Status write_file_atomically(const std::string& path, std::string_view text, unsigned mode);

// Holds an exclusive flock on a file while alive (one daemon per state folder).
class FileLock {
 public:
  // kAlreadyExists when another process holds the lock.
  static Result<FileLock> acquire(const std::string& path);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// Searches PATH for an executable; "" when absent.
std::string find_in_path(const std::string& name);

}  // namespace yonder::os
