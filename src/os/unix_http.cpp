#include "os/unix_http.h"

#include <utility>  // before Boost (GCC 12)

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <cstring>

#include "os/unique_fd.h"

namespace yonder::os {
namespace http = boost::beast::http;

namespace {

using Fd = UniqueFd;

enum class Wait { kReady, kTimeout, kInterrupted };

// Waits for `events` on fd until `deadline`, or until `interrupt_fd` (when
// >= 0) becomes readable.
Wait wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline, int interrupt_fd) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Wait::kTimeout;
    pollfd p[2] = {{fd, events, 0}, {interrupt_fd, POLLIN, 0}};
    int rc = ::poll(p, interrupt_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (rc > 0 && interrupt_fd >= 0 && (p[1].revents & POLLIN)) return Wait::kInterrupted;
    if (rc > 0) return Wait::kReady;
    if (rc == 0) return Wait::kTimeout;
    if (errno != EINTR) return Wait::kTimeout;
  }
}

Error interrupted(const std::string& socket_path) {
  return make_error(ErrorCode::kUnavailable, "the request to " + socket_path + " was interrupted");
}

}  // namespace

Result<HttpResponse> unix_http_request(const std::string& socket_path, std::string_view method,
                                       std::string_view target, std::string_view body,
                                       const HttpRequestOptions& options) {
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    return make_error(ErrorCode::kInvalidArgument, "socket path is too long (max " +
                                                       std::to_string(sizeof addr.sun_path - 1) +
                                                       " bytes): " + socket_path);
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return make_error(ErrorCode::kInternal, std::string("socket(): ") + std::strerror(errno));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    return make_error(ErrorCode::kUnavailable, "cannot connect to " + socket_path + ": " + std::strerror(e));
  }
  std::string req = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: localhost\r\n" +
                    "User-Agent: yonder\r\nConnection: close\r\nAccept: application/json\r\n";
  if (!options.bearer_token.empty()) req += "Authorization: Bearer " + options.bearer_token + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n";
  req += body;
  size_t off = 0;
  while (off < req.size()) {
    if (auto w = wait_fd(fd.get(), POLLOUT, deadline, options.interrupt_fd); w != Wait::kReady) {
      if (w == Wait::kInterrupted) return interrupted(socket_path);
      return make_error(ErrorCode::kUnavailable, "timed out sending to " + socket_path);
    }
    ssize_t n = ::send(fd.get(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorCode::kUnavailable, "connection to " + socket_path + " closed while sending");
    off += static_cast<size_t>(n);
  }
  http::response_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(options.max_body);
  if (method == "HEAD") parser.skip(true);
  std::string buf;
  char chunk[16384];
  bool eof = false;
  while (!parser.is_done()) {
    if (!eof) {
      if (auto w = wait_fd(fd.get(), POLLIN, deadline, options.interrupt_fd); w != Wait::kReady) {
        if (w == Wait::kInterrupted) return interrupted(socket_path);
        return make_error(ErrorCode::kUnavailable, "timed out waiting for a reply from " + socket_path);
      }
      ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return make_error(ErrorCode::kUnavailable, "reading from " + socket_path + ": " + std::strerror(errno));
      if (n == 0) eof = true;
      buf.append(chunk, static_cast<size_t>(n));
    }
    boost::beast::error_code ec;
    if (eof && buf.empty()) {
      if (!parser.got_some()) {
        return make_error(ErrorCode::kUnavailable, socket_path + " closed the connection without a reply");
      }
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        return make_error(ErrorCode::kUnavailable, socket_path + " closed the connection before a full reply");
      }
      break;
    }
    size_t used = parser.put(boost::asio::buffer(buf), ec);
    if (ec == http::error::need_more) {
      ec = {};
    }
    if (ec) {
      return make_error(ErrorCode::kInvalidArgument, "bad HTTP reply from " + socket_path + ": " + ec.message());
    }
    buf.erase(0, used);
    if (used == 0 && eof) {
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        return make_error(ErrorCode::kUnavailable, socket_path + " closed the connection before a full reply");
      }
    }
  }
  auto res = parser.release();
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.body = std::move(res.body());
  return out;
}

}  // namespace yonder::os
