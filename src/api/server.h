// The local API server: HTTP/1.1 with JSON bodies on a unix socket (mode
// 0600) that only the node's user can open. The CLI and, later, the loopback
// dashboard speak the same routes: one API, not two.
//
// Threading: the server runs on the daemon's io_context thread. Handlers are
// called on that thread and must call `reply` exactly once, on that thread
// (post blocking work to a pool and post the reply back).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace boost::asio {
class io_context;
}

namespace yonder::api {

struct Request {
  std::string method;
  std::string path;   // without the query
  std::string query;  // after '?', raw
  std::string body;
};

struct Response {
  int status = 200;
  std::string body;  // JSON text
  static Response json(int status, const nlohmann::json& body);
  // {"error": {"code": ..., "message": ...}} with the HTTP status for the code.
  static Response error(const Error& e);
};

// Query parameters of a request ("a=1&b=2"): at most 32, values raw (the
// CLI sends only ids and numbers, so no percent-decoding).
std::map<std::string, std::string> parse_query(std::string_view query);

// A request body that must be a JSON object; kInvalidArgument otherwise
// (an empty body included).
Result<nlohmann::json> parse_json_body(std::string_view body);

using Reply = std::function<void(Response)>;
using Handler = std::function<void(const Request&, Reply)>;

class Router {
 public:
  void add(std::string method, std::string path, Handler handler);
  // Finds the handler; a 404/405 Response otherwise.
  void dispatch(const Request& req, Reply reply) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    Handler handler;
  };
  std::vector<Route> routes_;
};

struct ServerLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  int request_timeout_s = 30;
};

class LocalApiServer {
 public:
  LocalApiServer(boost::asio::io_context& io, std::string socket_path, Router router, ServerLimits limits = {});
  ~LocalApiServer();

  // Binds (replacing a stale socket file), sets mode 0600 and starts accepting.
  Status start();
  // Stops accepting and removes the socket file. Idempotent.
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::api
