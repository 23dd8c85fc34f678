// The raw TCP anchor the carrier benches compare with: `bytes` one way over
// loopback, in writes of `block` bytes; seconds until the receiver has read
// everything.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace yonder::bench {

inline double raw_tcp_seconds(uint64_t bytes, size_t block_size) {
  using Clock = std::chrono::steady_clock;
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(lfd, 1);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread rx([lfd] {
    int c = ::accept(lfd, nullptr, nullptr);
    std::vector<char> buf(256 * 1024);
    while (::read(c, buf.data(), buf.size()) > 0) {
    }
    ::close(c);
  });
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  std::vector<char> block(block_size, 0x5a);
  auto start = Clock::now();
  uint64_t left = bytes;
  while (left > 0) {
    ssize_t n = ::write(fd, block.data(), std::min<uint64_t>(left, block.size()));
    if (n <= 0) break;
    left -= static_cast<uint64_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  rx.join();  // the receiver has read everything
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  ::close(lfd);
  return s;
}

}  // namespace yonder::bench
