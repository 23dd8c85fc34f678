// The local API server: HTTP/1.1 with JSON bodies on a unix socket (mode
// 0600) that only the node's user can open and, when api.listen allows, on
// a TCP port for browsers, scripts and Prometheus (loopback, or with TLS
// any address: api/tls.h). Both listeners
// serve the same router behind the same gate (api/auth.h): one API, not two,
// and every route needs the API token.
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
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/websocket.h"
#include "base/error.h"

namespace boost::asio {
class io_context;
}

namespace yonder::api {

class Router;

enum class Transport { kUnix, kTcp };
// How a request proved it may use the API (set by the gate before routing).
enum class AuthKind { kNone, kToken, kSession };

struct Request {
  std::string method;
  std::string path;   // without the query
  std::string query;  // after '?', raw
  std::string body;
  // The headers the gate reads, as sent (untrusted).
  std::string authorization;
  std::string cookie;
  std::string origin;
  std::string host;
  std::string sec_fetch_site;
  // Upgrade, Connection, Sec-WebSocket-Key/-Version (api/websocket.h).
  ws::UpgradeHeaders websocket;
  Transport transport = Transport::kUnix;
  AuthKind auth = AuthKind::kNone;
  // The router dispatching this request, for handlers that compose other
  // routes (metrics); null outside the server.
  const Router* router = nullptr;
};

struct Response {
  Response() = default;
  Response(int status_code, std::string body_text, std::string type = "application/json")
      : status(status_code), body(std::move(body_text)), content_type(std::move(type)) {}
  int status = 200;
  std::string body;  // JSON text unless content_type says otherwise
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Set-Cookie, Location, ...
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

// A WebSocket route streams text messages from the server to the client.
// After the gate has admitted the upgrade request and the handshake is
// done, the server calls the route's opener once with the request, then
// calls the returned WsNext for each next message, after the previous one
// has been written (one in flight: the stream paces itself by the socket).
// WsNext must call its callback once, on the io thread; a `last` message is
// followed by a close frame with `close_code`. A WsNext may still answer
// after the client has gone; the server then drops the message.
struct WsMessage {
  std::string text;
  bool last = false;
  uint16_t close_code = ws::kCloseNormal;
};
using WsNext = std::function<void(std::function<void(WsMessage)>)>;
using WsOpener = std::function<WsNext(const Request&)>;

class Router {
 public:
  void add(std::string method, std::string path, Handler handler);
  // Finds the handler; a 404/405 Response otherwise.
  void dispatch(const Request& req, Reply reply) const;
  // Every registered route as (method, path), in registration order: the
  // OpenAPI document and the security tests are checked against it.
  std::vector<std::pair<std::string, std::string>> routes() const;
  // Registers `path` as a WebSocket route. Also add a GET route for it (it
  // answers requests that do not upgrade): see add_websocket_follow.
  void add_websocket(std::string path, WsOpener open);
  // The opener for `path`, or null when it is not a WebSocket route.
  const WsOpener* websocket(std::string_view path) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    Handler handler;
  };
  std::vector<Route> routes_;
  std::vector<std::pair<std::string, WsOpener>> websockets_;
};

// Serves the long-poll route `poll_path` (a JSON object with "next_offset"
// and "ended", as GET /v1/jobs/logs) as the WebSocket route `ws_path`: GET
// ws_path?QUERY upgrades, then the server dispatches poll_path?QUERY with
// offset=N&wait_ms=`wait_ms` in-process under the same auth, sends each 200
// body as one text message, follows next_offset, and closes (1000) after
// the body that says ended. Any other answer is sent as the last message
// and the socket is closed with 1011. A plain GET of ws_path is 426.
void add_websocket_follow(Router& router, const std::string& ws_path, const std::string& poll_path,
                          int wait_ms = 10000);

struct ServerLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  int request_timeout_s = 30;
  size_t max_websocket_frame_bytes = 4096;  // from clients (they only ping and close)
  size_t max_websocket_connections = 32;    // open at once; more are refused with 503
};

class ApiAuth;
class ApiTls;  // api/tls.h

class LocalApiServer {
 public:
  // Adds the API's own routes (api/builtin_routes.h) to `router`. `auth`
  // gates every request and must outlive the server.
  LocalApiServer(boost::asio::io_context& io, std::string socket_path, Router router, ApiAuth& auth,
                 ServerLimits limits = {});
  ~LocalApiServer();

  // Binds (replacing a stale socket file), sets mode 0600 and starts accepting.
  Status start();
  // Also listens on host:port (port 0 picks one); returns the bound port and
  // tells `auth` (origins: the bound address, loopback names on a loopback
  // or wildcard bind, and with TLS the certificate's names). With `tls`
  // every connection must complete a TLS handshake first (HTTPS, and
  // WebSockets as wss://); a plain HTTP request there gets a 400 that says
  // to use https, then the connection closes. The caller has checked the
  // address (parse_api_listen: non-loopback only with TLS).
  Result<int> listen_tcp(const std::string& host, uint16_t port, std::shared_ptr<ApiTls> tls = nullptr);
  // Stops accepting and removes the socket file. Idempotent.
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::api
