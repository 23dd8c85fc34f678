#include "os/proc_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace yonder::os {

Result<std::string> read_small_file(const std::string& path, size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return make_error(e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                      "reading " + path + ": " + std::strerror(e));
  }
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return make_error(ErrorCode::kInternal, "reading " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max) {
      ::close(fd);
      return make_error(ErrorCode::kResourceExhausted, path + " is larger than " + std::to_string(max) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace yonder::os
