// A small blocking HTTP/1.1 client over a unix socket, for the CLI (talking to
// yonderd) and for `yonder doctor` (talking to Docker's Engine API). The
// daemon's own Docker calls use os/http_stream.h instead.
//
// Responses are untrusted input: header and body sizes are bounded and the
// parser is Boost.Beast's.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::os {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

struct HttpRequestOptions {
  std::chrono::milliseconds timeout{10000};
  size_t max_body = 8 << 20;
  std::string bearer_token;  // sent as Authorization: Bearer, when set
  // When >= 0: the request gives up (kUnavailable, "... was interrupted") as
  // soon as this fd is readable, e.g. the self-pipe of a signal handler, so
  // a long poll does not delay the reaction to Ctrl-C. The fd is not read.
  int interrupt_fd = -1;
};

// One request on a fresh connection. Connection failures are kUnavailable
// (the caller knows what service was meant and how to start it).
Result<HttpResponse> unix_http_request(const std::string& socket_path, std::string_view method,
                                       std::string_view target, std::string_view body = {},
                                       const HttpRequestOptions& options = {});

}  // namespace yonder::os
