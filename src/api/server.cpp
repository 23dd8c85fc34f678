#include "api/server.h"

#include <utility>  // before Boost.Asio coroutine headers (GCC 12)

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/builtin_routes.h"
#include "api/request_parse.h"

namespace yonder::api {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using Socket = asio::local::stream_protocol::socket;
using TcpSocket = asio::ip::tcp::socket;

// Messages echo request bytes (paths, Origin, Host) that need not be UTF-8:
// replaced, never thrown on.
Response Response::json(int status, const nlohmann::json& body) {
  return Response(status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Response Response::error(const Error& e) {
  int status = 500;
  switch (e.code()) {
    case ErrorCode::kInvalidArgument: status = 400; break;
    case ErrorCode::kNotFound: status = 404; break;
    case ErrorCode::kAlreadyExists: status = 409; break;
    case ErrorCode::kPermissionDenied: status = 403; break;
    case ErrorCode::kUnavailable: status = 503; break;
    case ErrorCode::kFailedPrecondition: status = 409; break;
    case ErrorCode::kResourceExhausted: status = 429; break;
    case ErrorCode::kDataLoss:
    case ErrorCode::kInternal: status = 500; break;
  }
  return json(status, {{"error", {{"code", error_code_name(e.code())}, {"message", e.to_string()}}}});
}

std::map<std::string, std::string> parse_query(std::string_view q) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < q.size() && out.size() < 32) {
    size_t amp = q.find('&', start);
    std::string_view part = q.substr(start, amp == std::string_view::npos ? std::string_view::npos : amp - start);
    size_t eq = part.find('=');
    if (eq != std::string_view::npos) out[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  return out;
}

Result<nlohmann::json> parse_json_body(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "the request body must be a JSON object");
  }
  return j;
}

void Router::add(std::string method, std::string path, Handler handler) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler)});
}

std::vector<std::pair<std::string, std::string>> Router::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(routes_.size());
  for (const auto& r : routes_) out.emplace_back(r.method, r.path);
  return out;
}

void Router::dispatch(const Request& req, Reply reply) const {
  bool path_known = false;
  for (const auto& r : routes_) {
    if (r.path != req.path) continue;
    path_known = true;
    if (r.method == req.method) {
      r.handler(req, std::move(reply));
      return;
    }
  }
  if (path_known) {
    reply(Response::json(405, {{"error", {{"code", "method_not_allowed"},
                                          {"message", req.method + " is not allowed on " + req.path}}}}));
  } else {
    reply(Response::error(make_error(ErrorCode::kNotFound, "no such API route: " + req.path +
                                                               "; is the CLI newer than the daemon? restart yonderd")));
  }
}

struct LocalApiServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_ctx, std::string path, Router r, ApiAuth& a, ServerLimits l)
      : io(io_ctx), socket_path(std::move(path)), router(std::move(r)), auth(a), limits(l), acceptor(io_ctx),
        tcp_acceptor(io_ctx) {}

  asio::io_context& io;
  std::string socket_path;
  Router router;
  ApiAuth& auth;
  ServerLimits limits;
  asio::local::stream_protocol::acceptor acceptor;
  asio::ip::tcp::acceptor tcp_acceptor;
  bool stopped = false;

  template <class Acceptor>
  asio::awaitable<void> accept_loop(Acceptor& from, Transport transport) {
    auto self = shared_from_this();
    while (!stopped) {
      boost::system::error_code ec;
      auto sock = co_await from.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (stopped || ec == asio::error::operation_aborted) co_return;
        continue;  // EMFILE and friends: keep serving the connections we have
      }
      asio::co_spawn(io, self->session(std::move(sock), transport), asio::detached);
    }
  }

  template <class Sock>
  asio::awaitable<void> session(Sock sock, Transport transport) {
    auto self = shared_from_this();
    boost::beast::flat_buffer buffer;
    asio::steady_timer deadline(io);
    for (;;) {
      http::request_parser<http::string_body> parser;
      limit_parser(parser, limits);
      deadline.expires_after(std::chrono::seconds(limits.request_timeout_s));
      deadline.async_wait([&sock](boost::system::error_code ec) {
        if (!ec) sock.close();
      });
      boost::system::error_code ec;
      co_await http::async_read(sock, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      deadline.cancel();
      if (ec) {
        if (ec != http::error::end_of_stream && ec != asio::error::eof && sock.is_open()) {
          Response bad = Response::json(400, {{"error", {{"code", "invalid_argument"},
                                                        {"message", "bad HTTP request: " + ec.message()}}}});
          co_await write(sock, bad, false, ec);
        }
        co_return;
      }
      auto msg = parser.release();
      Request req = request_from_message(msg, transport);
      req.router = &router;

      // The gate first: token, session cookie, origin; GET /login.
      std::optional<Response> response = auth.admit(req, std::chrono::steady_clock::now());
      if (!response) {
        // Wait for the handler's reply: the timer is the event it fires.
        asio::steady_timer done(io, asio::steady_timer::time_point::max());
        router.dispatch(req, [&response, &done](Response r) {
          response = std::move(r);
          done.cancel();
        });
        if (!response) co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (!response) co_return;  // cannot happen: handlers always reply
      }
      co_await write(sock, *response, msg.keep_alive(), ec);
      if (ec || !msg.keep_alive()) co_return;
    }
  }

  template <class Sock>
  asio::awaitable<void> write(Sock& sock, const Response& r, bool keep_alive, boost::system::error_code& ec) {
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::server, "yonderd");
    res.set(http::field::content_type, r.content_type);
    res.set(http::field::cache_control, "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("X-Frame-Options", "DENY");
    for (const auto& [name, value] : r.headers) res.insert(name, value);
    res.keep_alive(keep_alive);
    res.body() = r.body;
    res.prepare_payload();
    co_await http::async_write(sock, res, asio::redirect_error(asio::use_awaitable, ec));
  }
};

LocalApiServer::LocalApiServer(asio::io_context& io, std::string socket_path, Router router, ApiAuth& auth,
                               ServerLimits limits) {
  add_builtin_routes(router, auth);
  impl_ = std::make_shared<Impl>(io, std::move(socket_path), std::move(router), auth, limits);
}

LocalApiServer::~LocalApiServer() { stop(); }

Status LocalApiServer::start() {
  // The caller holds the state folder's lock, so a socket file here is stale.
  ::unlink(impl_->socket_path.c_str());
  boost::system::error_code ec;
  asio::local::stream_protocol::endpoint ep(impl_->socket_path);
  impl_->acceptor.open(ep.protocol(), ec);
  // Created 0600 from the start (no window where others could connect).
  mode_t old = ::umask(077);
  if (!ec) impl_->acceptor.bind(ep, ec);
  ::umask(old);
  if (!ec && ::chmod(impl_->socket_path.c_str(), 0600) != 0) {
    ec.assign(errno, boost::system::system_category());
  }
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::kUnavailable,
                      "cannot listen on " + impl_->socket_path + ": " + ec.message() +
                          "; check that the folder exists and is writable, or set api.socket");
  }
  asio::co_spawn(impl_->io, impl_->accept_loop(impl_->acceptor, Transport::kUnix), asio::detached);
  return ok_status();
}

Result<int> LocalApiServer::listen_tcp(const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return make_error(ErrorCode::kInvalidArgument, "api.listen: " + host + " is not an IP address");
  asio::ip::tcp::endpoint ep(address, port);
  auto& a = impl_->tcp_acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    bool busy = ec == asio::error::address_in_use;
    a.close();
    return make_error(busy ? ErrorCode::kAlreadyExists : ErrorCode::kUnavailable,
                      "cannot listen on " + host + ":" + std::to_string(port) + " (api.listen): " + ec.message() +
                          (busy ? "; another program (or another yonderd) has that port: set api.listen to "
                                  "127.0.0.1:0 (any free port) or another port, or off"
                                : ""));
  }
  int bound = a.local_endpoint().port();
  impl_->auth.set_tcp_port(bound);
  asio::co_spawn(impl_->io, impl_->accept_loop(impl_->tcp_acceptor, Transport::kTcp), asio::detached);
  return bound;
}

void LocalApiServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  boost::system::error_code ec;
  if (impl_->acceptor.is_open()) {
    impl_->acceptor.close(ec);
    ::unlink(impl_->socket_path.c_str());
  }
  if (impl_->tcp_acceptor.is_open()) impl_->tcp_acceptor.close(ec);
}

}  // namespace yonder::api
