// A streaming HTTP/1.1 exchange over a unix socket: the response head is read
// up front, the body is handed out as it arrives (chunked, sized or
// close-delimited), and a 101 upgrade turns the connection into a raw
// two-way byte stream. Docker's Engine API needs all three: `wait` blocks
// until a container exits, `logs?follow` streams for as long as it runs, and
// `exec` with a TTY is an upgraded raw stream.
//
// Threading: one thread reads/writes; cancel() may be called from any other
// thread while the stream is alive, and makes a blocked read return
// kUnavailable ("cancelled") at once. Replies are untrusted input: the head
// is bounded and parsed by Boost.Beast.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::os {

struct HttpStreamRequest {
  std::string method = "GET";
  std::string target;             // "/v1.41/containers/x/logs?follow=1"
  std::string body;               // sent with Content-Type: application/json when non-empty
  bool upgrade = false;           // asks for "Upgrade: tcp" (Docker's attach/exec hijack)
  std::chrono::milliseconds head_timeout{30000};  // connect + send + response head
};

class HttpStream {
 public:
  static constexpr std::chrono::milliseconds kNoTimeout{-1};

  // Connects to `socket_path`, sends the request and reads the response head.
  // kUnavailable when the socket does not answer.
  static Result<std::unique_ptr<HttpStream>> open(const std::string& socket_path, const HttpStreamRequest& request);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  int status() const { return status_; }
  // Lower-case header name -> value of the response head.
  const std::map<std::string, std::string>& headers() const { return headers_; }
  bool upgraded() const { return status_ == 101; }

  // Up to `size` body bytes (after chunked decoding; raw bytes after an
  // upgrade). 0 means the body (or raw stream) ended. kUnavailable on
  // timeout, cancel or a broken connection; kInvalidArgument on a malformed
  // body.
  Result<size_t> read_some(char* out, size_t size, std::chrono::milliseconds timeout = kNoTimeout);
  // Reads the rest of the body, at most `max` bytes (kResourceExhausted past it).
  Result<std::string> read_all(size_t max, std::chrono::milliseconds timeout = kNoTimeout);
  // Raw writes, after an upgrade only.
  Status write_all(std::string_view data);
  // Half-closes the sending side (the far end sees EOF on its stdin).
  void close_write();
  // Thread-safe: wakes and fails any blocked read or write.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  struct Parser;
  HttpStream(int fd, std::string socket_path);
  Result<size_t> fill(std::chrono::steady_clock::time_point deadline, bool has_deadline);

  int fd_ = -1;
  std::string socket_path_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  std::unique_ptr<Parser> parser_;
  std::string pending_;  // received bytes not yet given to the parser / caller
  bool eof_ = false;
  bool body_done_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace yonder::os
