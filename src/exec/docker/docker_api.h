// The Docker Engine API (v1.41) over its unix socket: plain requests with
// bounded replies, and streams (wait, logs, pull, exec). Maps Docker's
// error replies onto yonder::Error with Docker's own message, so users see
// what the engine said. Podman's compatible service answers the same calls.
//
// Threading: stateless apart from the socket path; safe from any thread.
// Every call blocks: worker threads only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "os/http_stream.h"

namespace yonder::exec::docker {

inline constexpr const char* kApiPrefix = "/v1.41";

struct ApiReply {
  int status = 0;
  std::string body;
};

class DockerApi {
 public:
  explicit DockerApi(std::string socket) : socket_(std::move(socket)) {}
  const std::string& socket() const { return socket_; }

  // `path` is below the version prefix ("/containers/json"). A non-2xx
  // reply is an Error: 404 kNotFound, 409 kFailedPrecondition, 400
  // kInvalidArgument, others kInternal; `what` names the operation.
  Result<ApiReply> call(std::string_view method, const std::string& path, const std::string& what,
                        std::string_view body = {}, std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Opens a stream; the same error mapping applies to its status.
  Result<std::unique_ptr<os::HttpStream>> stream(std::string_view method, const std::string& path,
                                                 const std::string& what, std::string body = {},
                                                 bool upgrade = false);

  // Error for a failed reply, with a hint when the socket itself is the problem.
  Error reply_error(int status, std::string_view body, const std::string& what) const;
  Error unreachable(const Error& cause) const;

 private:
  std::string socket_;
};

// Percent-encodes a query value.
std::string url_encode(std::string_view value);

}  // namespace yonder::exec::docker
