#include "os/http_stream.h"

#include <utility>  // before Boost (GCC 12)

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

namespace yonder::os {
namespace http = boost::beast::http;

namespace {
constexpr size_t kMaxHead = 64 * 1024;
constexpr size_t kReadChunk = 64 * 1024;

using SteadyTime = std::chrono::steady_clock::time_point;

// Waits for `events`; false on timeout. A negative timeout waits forever.
bool http_wait_fd(int fd, short events, SteadyTime deadline, bool has_deadline) {
  while (true) {
    int ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the following recv/send report it
  }
}
}  // namespace

struct HttpStream::Parser {
  http::response_parser<http::buffer_body> p;
};

HttpStream::HttpStream(int fd, std::string socket_path)
    : fd_(fd), socket_path_(std::move(socket_path)), parser_(std::make_unique<Parser>()) {}

HttpStream::~HttpStream() {
  if (fd_ >= 0) ::close(fd_);
}

void HttpStream::cancel() {
  cancelled_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

void HttpStream::close_write() { ::shutdown(fd_, SHUT_WR); }

Result<size_t> HttpStream::fill(SteadyTime deadline, bool has_deadline) {
  if (cancelled_.load()) return make_error(ErrorCode::kUnavailable, "cancelled");
  if (!http_wait_fd(fd_, POLLIN, deadline, has_deadline)) {
    return make_error(ErrorCode::kUnavailable, "timed out waiting for " + socket_path_);
  }
  char chunk[kReadChunk];
  ssize_t n;
  do {
    n = ::recv(fd_, chunk, sizeof chunk, 0);
  } while (n < 0 && errno == EINTR);
  if (cancelled_.load()) return make_error(ErrorCode::kUnavailable, "cancelled");
  if (n < 0) return make_error(ErrorCode::kUnavailable, "reading from " + socket_path_ + ": " + std::strerror(errno));
  if (n == 0) eof_ = true;
  pending_.append(chunk, static_cast<size_t>(n));
  return static_cast<size_t>(n);
}

Result<std::unique_ptr<HttpStream>> HttpStream::open(const std::string& socket_path, const HttpStreamRequest& request) {
  auto deadline = std::chrono::steady_clock::now() + request.head_timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    return make_error(ErrorCode::kInvalidArgument, "socket path is too long: " + socket_path);
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::kInternal, std::string("socket(): ") + std::strerror(errno));
  std::unique_ptr<HttpStream> s(new HttpStream(fd, socket_path));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    return make_error(ErrorCode::kUnavailable, "cannot connect to " + socket_path + ": " + std::strerror(e));
  }
  std::string req = request.method + " " + request.target + " HTTP/1.1\r\nHost: docker\r\nUser-Agent: yonder\r\n";
  if (request.upgrade) req += "Connection: Upgrade\r\nUpgrade: tcp\r\n";
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  req += "\r\n" + request.body;
  size_t off = 0;
  while (off < req.size()) {
    if (!http_wait_fd(fd, POLLOUT, deadline, true)) {
      return make_error(ErrorCode::kUnavailable, "timed out sending to " + socket_path);
    }
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorCode::kUnavailable, "connection to " + socket_path + " closed while sending");
    off += static_cast<size_t>(n);
  }
  auto& parser = s->parser_->p;
  parser.header_limit(kMaxHead);
  // The caller bounds what it keeps. Not boost::none: Boost 1.74 reads it as
  // a limit of 0, so a reply with a Content-Length fails "body limit exceeded".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  parser.eager(false);
  while (!parser.is_header_done()) {
    if (s->pending_.empty() || s->eof_) {
      if (s->eof_) return make_error(ErrorCode::kUnavailable, socket_path + " closed the connection before replying");
      auto r = s->fill(deadline, true);
      if (!r) return std::move(r).error();
      continue;
    }
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(s->pending_), ec);
    if (ec == http::error::need_more) {
      ec = {};
      s->pending_.erase(0, used);
      auto r = s->fill(deadline, true);
      if (!r) return std::move(r).error();
      continue;
    }
    if (ec) return make_error(ErrorCode::kInvalidArgument, "bad HTTP reply from " + socket_path + ": " + ec.message());
    s->pending_.erase(0, used);
  }
  const auto& head = parser.get();
  s->status_ = static_cast<int>(head.result_int());
  for (const auto& field : head) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    s->headers_[name] = std::string(field.value());
  }
  if (parser.is_done()) s->body_done_ = true;
  return s;
}

Result<size_t> HttpStream::read_some(char* out, size_t size, std::chrono::milliseconds timeout) {
  bool has_deadline = timeout.count() >= 0;
  auto deadline = std::chrono::steady_clock::now() + (has_deadline ? timeout : std::chrono::milliseconds(0));
  if (size == 0) return size_t{0};
  if (upgraded()) {
    while (pending_.empty() && !eof_) {
      auto r = fill(deadline, has_deadline);
      if (!r) return std::move(r).error();
    }
    size_t n = std::min(size, pending_.size());
    std::memcpy(out, pending_.data(), n);
    pending_.erase(0, n);
    return n;
  }
  auto& parser = parser_->p;
  while (!body_done_) {
    if (!pending_.empty()) {
      auto& body = parser.get().body();
      body.data = out;
      body.size = size;
      body.more = true;
      boost::beast::error_code ec;
      size_t used = parser.put(boost::asio::buffer(pending_), ec);
      pending_.erase(0, used);
      size_t produced = size - body.size;
      if (ec == http::error::need_buffer || ec == http::error::need_more) ec = {};
      if (ec) return make_error(ErrorCode::kInvalidArgument, "bad HTTP body from " + socket_path_ + ": " + ec.message());
      if (parser.is_done()) body_done_ = true;
      if (produced > 0) return produced;
      if (used > 0) continue;
    }
    if (body_done_) break;
    if (eof_) {
      boost::beast::error_code ec;
      parser.put_eof(ec);
      if (ec || !parser.is_done()) {
        return make_error(ErrorCode::kUnavailable, socket_path_ + " closed the connection in the middle of a reply");
      }
      body_done_ = true;
      break;
    }
    auto r = fill(deadline, has_deadline);
    if (!r) return std::move(r).error();
  }
  return size_t{0};
}

Result<std::string> HttpStream::read_all(size_t max, std::chrono::milliseconds timeout) {
  std::string out;
  char buf[16384];
  while (true) {
    auto n = read_some(buf, sizeof buf, timeout);
    if (!n) return std::move(n).error();
    if (*n == 0) return out;
    if (out.size() + *n > max) {
      return make_error(ErrorCode::kResourceExhausted,
                        "reply from " + socket_path_ + " is larger than " + std::to_string(max) + " bytes");
    }
    out.append(buf, *n);
  }
}

Status HttpStream::write_all(std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    if (cancelled_.load()) return make_error(ErrorCode::kUnavailable, "cancelled");
    ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorCode::kUnavailable, "connection to " + socket_path_ + " closed while sending");
    off += static_cast<size_t>(n);
  }
  return ok_status();
}

}  // namespace yonder::os
