// The worker's I/O: reads requests from a connected socket, hands each to
// the CallWorker, writes the replies back. Blocking, one thread: a session
// is one client's calls, in order.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu/remote/worker.h"

namespace yonder::gpu::remote {

namespace {

bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int serve_connection(int fd, CallWorker& worker) {
  // Received bytes are read straight into `in`; [start, end) is what is not
  // handled yet. It grows to hold the largest frame seen (at most
  // kMaxFrameBytes, as complete_frame refuses more).
  std::vector<uint8_t> in(1u << 20);
  size_t start = 0;
  size_t end = 0;
  std::vector<uint8_t> out;
  for (;;) {
    if (end == in.size()) {
      if (start > 0) {
        std::memmove(in.data(), in.data() + start, end - start);
        end -= start;
        start = 0;
      } else {
        in.resize(std::min<size_t>(in.size() * 2, size_t{kMaxFrameBytes} + 4));
      }
    }
    ssize_t n = ::read(fd, in.data() + end, in.size() - end);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;  // the client closed the session (or the socket broke)
    end += static_cast<size_t>(n);
    for (;;) {
      int64_t body = complete_frame(in.data() + start, end - start);
      if (body < 0) {
        std::fprintf(stderr,
                     "yonder-cuda-worker: the client sent an empty frame or one longer than %u bytes; "
                     "session ended\n",
                     kMaxFrameBytes);
        return 1;
      }
      if (body == 0) break;
      bool go_on = worker.handle(in.data() + start + 4, static_cast<size_t>(body), out);
      start += 4 + static_cast<size_t>(body);
      if (!go_on) {
        write_all(fd, out.data(), out.size());
        std::fprintf(stderr, "yonder-cuda-worker: %s; session ended\n", worker.error().c_str());
        return 1;
      }
    }
    if (start == end) start = end = 0;
    // Answer every whole request read so far before reading more: a client
    // waits for its synchronous calls' replies.
    if (!out.empty()) {
      if (!write_all(fd, out.data(), out.size())) return 0;
      out.clear();
    }
  }
}

}  // namespace yonder::gpu::remote
