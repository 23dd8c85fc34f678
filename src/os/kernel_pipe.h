// A kernel pipe used as a splice(2) buffer between two sockets, so bytes
// move socket -> pipe -> socket without being copied through user space
// (the relay's pipe copier: src/relay/pipe.cpp). Linux only.
//
// Both calls are non-blocking and report how many bytes moved, 0 for end of
// stream (fill only), or -1 with errno (EAGAIN: wait for the socket).
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "base/error.h"

namespace yonder::os {

class KernelPipe {
 public:
  // `capacity` is a wish (F_SETPIPE_SZ): the kernel may give less.
  static Result<KernelPipe> create(size_t capacity);
  KernelPipe(KernelPipe&& o) noexcept;
  KernelPipe& operator=(KernelPipe&&) = delete;
  KernelPipe(const KernelPipe&) = delete;
  ~KernelPipe();

  // From a non-blocking socket into the pipe: at most `max` bytes.
  ssize_t fill_from(int socket_fd, size_t max);
  // From the pipe out to a non-blocking socket: at most `max` bytes.
  ssize_t drain_to(int socket_fd, size_t max);
  size_t capacity() const { return capacity_; }
  size_t buffered() const { return buffered_; }

 private:
  KernelPipe(int r, int w, size_t capacity) : read_fd_(r), write_fd_(w), capacity_(capacity) {}
  int read_fd_;
  int write_fd_;
  size_t capacity_;
  size_t buffered_ = 0;
};

}  // namespace yonder::os
