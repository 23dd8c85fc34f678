#include "os/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace yonder::os {

Result<UniqueFd> open_beneath(int dir_fd, std::string_view path, int flags, unsigned mode) {
  std::string p = path.empty() ? std::string(".") : std::string(path);
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd;
  do {
    // glibc 2.36 has no wrapper for openat2.
    fd = ::syscall(SYS_openat2, dir_fd, p.c_str(), &how, sizeof how);
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  int e = errno;
  std::string shown = "\"" + p.substr(0, 256) + "\"";
  switch (e) {
    case ELOOP:
      return make_error(ErrorCode::kPermissionDenied, shown +
                                                          " is or passes through a symbolic link, which is never "
                                                          "followed here");
    case EXDEV: return make_error(ErrorCode::kPermissionDenied, shown + " leads outside the folder");
    case ENOENT: return make_error(ErrorCode::kNotFound, shown + " does not exist");
    case ENOSYS:
      return make_error(ErrorCode::kUnavailable,
                        "this kernel has no openat2(2) (Linux 5.6 or later is needed to "
                        "read and write a running job's files safely)");
    default: return make_error(ErrorCode::kFailedPrecondition, "cannot open " + shown + ": " + std::strerror(e));
  }
}

}  // namespace yonder::os
