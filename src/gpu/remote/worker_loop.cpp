// The worker's I/O: reads requests from a connected socket, hands each to
// the CallWorker, writes the replies back. Blocking, one thread: a session
// is one client's calls, in order.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t start = 0;  // where the unconsumed bytes of `in` begin
  std::vector<uint8_t> chunk(256 * 1024);
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;  // the client closed the session (or the socket broke)
    in.insert(in.end(), chunk.begin(), chunk.begin() + n);
    for (;;) {
      int64_t body = complete_frame(in.data() + start, in.size() - start);
      if (body < 0) {
        std::fprintf(stderr, "yonder-cuda-worker: the client sent a frame longer than %u bytes; session ended\n",
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
    // Answer every whole request read so far before reading more: a client
    // waits for its synchronous calls' replies.
    if (!out.empty()) {
      if (!write_all(fd, out.data(), out.size())) return 0;
      out.clear();
    }
    in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(start));
    start = 0;
  }
}

}  // namespace yonder::gpu::remote
