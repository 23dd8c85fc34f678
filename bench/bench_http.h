// A blocking HTTP/1.1 client over one keep-alive TCP connection to
// 127.0.0.1, for the API benchmarks: what a browser or a script pays per
// request once connected. Replies must carry Content-Length (yonderd's do).
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace yonder::bench {

class KeepAliveClient {
 public:
  KeepAliveClient(int port, std::string token) : port_(port), token_(std::move(token)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~KeepAliveClient() { ::close(fd_); }
  KeepAliveClient(const KeepAliveClient&) = delete;
  KeepAliveClient& operator=(const KeepAliveClient&) = delete;

  // GET target; the status code (0 on a broken connection); the body in `body`.
  int get(const std::string& target, std::string* body = nullptr) {
    if (!ok_) return 0;
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                      "\r\nAuthorization: Bearer " + token_ + "\r\n\r\n";
    if (::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return 0;
    size_t end;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return 0;
    }
    std::string head = in_.substr(0, end);
    size_t cl = head.find("Content-Length: ");
    if (cl == std::string::npos) cl = head.find("content-length: ");
    size_t length = cl == std::string::npos ? 0 : std::strtoull(head.c_str() + cl + 16, nullptr, 10);
    while (in_.size() < end + 4 + length) {
      if (!fill()) return 0;
    }
    if (body != nullptr) *body = in_.substr(end + 4, length);
    in_.erase(0, end + 4 + length);
    return head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
  }

 private:
  bool fill() {
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int port_;
  std::string token_;
  int fd_ = -1;
  bool ok_ = false;
  std::string in_;
};

// The q-quantile (0-1) of `v` (sorted here).
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace yonder::bench
