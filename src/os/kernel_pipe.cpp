#include "os/kernel_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace yonder::os {

Result<KernelPipe> KernelPipe::create(size_t capacity) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return make_error(ErrorCode::kResourceExhausted,
                      std::string("cannot make a pipe: ") + std::strerror(errno) + " (raise the open file limit)");
  }
  int got = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(capacity));
  if (got < 0) got = ::fcntl(fds[1], F_GETPIPE_SZ);  // over the limit: keep the default
  return KernelPipe(fds[0], fds[1], got > 0 ? static_cast<size_t>(got) : 65536);
}

KernelPipe::KernelPipe(KernelPipe&& o) noexcept
    : read_fd_(o.read_fd_), write_fd_(o.write_fd_), capacity_(o.capacity_), buffered_(o.buffered_) {
  o.read_fd_ = o.write_fd_ = -1;
}

KernelPipe::~KernelPipe() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
}

ssize_t KernelPipe::fill_from(int socket_fd, size_t max) {
  size_t room = capacity_ - buffered_;
  if (max > room) max = room;
  if (max == 0) {
    errno = EAGAIN;
    return -1;
  }
  ssize_t n = ::splice(socket_fd, nullptr, write_fd_, nullptr, max, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n > 0) buffered_ += static_cast<size_t>(n);
  return n;
}

ssize_t KernelPipe::drain_to(int socket_fd, size_t max) {
  if (max > buffered_) max = buffered_;
  if (max == 0) return 0;
  ssize_t n = ::splice(read_fd_, nullptr, socket_fd, nullptr, max, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n > 0) buffered_ -= static_cast<size_t>(n);
  return n;
}

}  // namespace yonder::os
