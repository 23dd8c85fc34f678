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
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "api/auth.h"
#include "api/builtin_routes.h"
#include "api/request_parse.h"
#include "api/tls.h"

namespace yonder::api {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using Socket = asio::local::stream_protocol::socket;
using TcpSocket = asio::ip::tcp::socket;
using TlsStream = asio::ssl::stream<TcpSocket>;

namespace {

// The socket under any of the three stream types (a TLS stream's TCP socket).
template <class Sock>
void close_socket(Sock& sock) {
  boost::system::error_code ignored;
  boost::beast::get_lowest_layer(sock).close(ignored);
}

template <class Sock>
bool socket_open(Sock& sock) {
  return boost::beast::get_lowest_layer(sock).is_open();
}

}  // namespace

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

void Router::add_websocket(std::string path, WsOpener open) {
  websockets_.emplace_back(std::move(path), std::move(open));
}

const WsOpener* Router::websocket(std::string_view path) const {
  for (const auto& [p, open] : websockets_) {
    if (p == path) return &open;
  }
  return nullptr;
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
  std::shared_ptr<ApiTls> tls;  // set: the TCP listener speaks only HTTPS
  bool stopped = false;
  size_t websockets_open = 0;

  // One upgraded connection. The session coroutine writes (messages, pongs,
  // the close frame, in order, one at a time); a reader coroutine decodes
  // the client's frames. They meet here, on the io thread.
  template <class Sock>
  struct WsConn {
    WsConn(Sock s, asio::io_context& io, size_t max_frame) : sock(std::move(s)), wake(io), decoder(max_frame) {}
    Sock sock;
    asio::steady_timer wake;  // cancelled when there is something to do
    ws::FrameDecoder decoder;
    std::deque<std::string> outbox;  // encoded frames
    bool close_queued = false;  // our close frame is in the outbox or sent
    bool peer_closed = false;   // the client's close frame came, or it went away
    bool pulling = false;       // a WsNext is in flight
    bool done = false;          // the session has ended: drop late messages
    void notify() { wake.cancel(); }
    void queue_close(uint16_t code, std::string_view reason) {
      if (close_queued) return;
      close_queued = true;
      outbox.push_back(ws::encode_close(code, reason));
      notify();
    }
  };

  template <class Sock>
  static asio::awaitable<void> ws_read(std::shared_ptr<WsConn<Sock>> c) {
    char buf[4096];
    for (;;) {
      // Frames already fed (bytes that came with the handshake) first.
      for (;;) {
        auto frame = c->decoder.next();
        if (!frame) {
          c->queue_close(c->decoder.close_code(), frame.error().message());
          c->peer_closed = true;  // nothing more is read from it
          co_return;
        }
        if (!*frame) break;
        const ws::Frame& f = **frame;
        if (f.opcode == ws::Opcode::kPing && !c->close_queued) {
          c->outbox.push_back(ws::encode_frame(ws::Opcode::kPong, f.payload));
          c->notify();
        } else if (f.opcode == ws::Opcode::kClose) {
          // Echo the status (5.5.1), or 1000 when none came.
          c->queue_close(f.close_code != 0 ? f.close_code : ws::kCloseNormal, "");
          c->peer_closed = true;
          c->notify();
          co_return;
        }
        // Data frames and pongs from the client mean nothing here.
      }
      boost::system::error_code ec;
      size_t n = co_await c->sock.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        c->peer_closed = true;
        c->notify();
        co_return;
      }
      c->decoder.feed(std::string_view(buf, n));
    }
  }

  template <class Sock>
  asio::awaitable<void> websocket(Sock& sock, std::string_view early_bytes, const Request& req, const WsOpener& open) {
    auto self = shared_from_this();
    auto c = std::make_shared<WsConn<Sock>>(std::move(sock), io, limits.max_websocket_frame_bytes);
    c->decoder.feed(early_bytes);
    ++websockets_open;
    WsNext next = open(req);
    asio::co_spawn(io, ws_read(c), asio::detached);
    asio::steady_timer close_wait(io);
    asio::steady_timer write_deadline(io);
    bool close_sent = false;
    bool close_wait_armed = false;
    for (;;) {
      if (!c->outbox.empty()) {
        std::string frame = std::move(c->outbox.front());
        c->outbox.pop_front();
        boost::system::error_code ec;
        // A client that stops reading must not hold the connection forever.
        write_deadline.expires_after(std::chrono::seconds(limits.request_timeout_s));
        write_deadline.async_wait([c](boost::system::error_code e) {
          if (!e) close_socket(c->sock);
        });
        co_await asio::async_write(c->sock, asio::buffer(frame), asio::redirect_error(asio::use_awaitable, ec));
        write_deadline.cancel();
        if (ec) break;
        if (c->close_queued && c->outbox.empty()) close_sent = true;
        continue;
      }
      if (close_sent) {
        if (c->peer_closed) break;
        if (!close_wait_armed) {
          // Wait a little for the client's close (7.1.1), then drop the TCP connection.
          close_wait_armed = true;
          close_wait.expires_after(std::chrono::seconds(5));
          close_wait.async_wait([c](boost::system::error_code ec) {
            if (!ec) {
              c->peer_closed = true;
              c->notify();
            }
          });
        }
      } else if (c->peer_closed && !c->close_queued) {
        break;  // the client vanished without a close frame
      } else if (!c->pulling && !c->close_queued && !stopped) {
        c->pulling = true;
        next([c](WsMessage m) {
          if (c->done) return;
          c->pulling = false;
          if (!c->close_queued) {
            c->outbox.push_back(ws::encode_frame(ws::Opcode::kText, m.text));
            if (m.last) c->queue_close(m.close_code, "");
          }
          c->notify();
        });
        continue;  // it may have answered at once
      } else if (stopped && !c->close_queued) {
        c->queue_close(ws::kCloseGoingAway, "yonderd is stopping");
        continue;
      }
      c->wake.expires_at(asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await c->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    c->done = true;
    close_wait.cancel();
    write_deadline.cancel();
    close_socket(c->sock);  // ends the reader too
    --websockets_open;
  }

  // The 101 answer, or the refusal, to an admitted upgrade request.
  template <class Sock>
  asio::awaitable<bool> websocket_handshake(Sock& sock, const Request& req, boost::system::error_code& ec) {
    if (auto checked = ws::check_upgrade(req.websocket); !checked) {
      Response bad = Response::error(checked.error());
      bad.headers.emplace_back("Sec-WebSocket-Version", "13");
      co_await write(sock, bad, false, ec);
      co_return false;
    }
    if (websockets_open >= limits.max_websocket_connections) {
      co_await write(sock, Response::error(make_error(ErrorCode::kUnavailable,
                                                      "too many WebSocket connections are open; close a "
                                                      "dashboard tab, or long-poll instead")),
                     false, ec);
      co_return false;
    }
    http::response<http::empty_body> res{http::status::switching_protocols, 11};
    res.set(http::field::server, "yonderd");
    res.set(http::field::upgrade, "websocket");
    res.set(http::field::connection, "Upgrade");
    res.set(http::field::sec_websocket_accept, ws::accept_key(req.websocket.key));
    co_await http::async_write(sock, res, asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }

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
      if constexpr (std::is_same_v<std::decay_t<decltype(sock)>, TcpSocket>) {
        if (tls) {
          asio::co_spawn(io, self->tls_session(std::move(sock)), asio::detached);
          continue;
        }
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
        if (!ec) close_socket(sock);
      });
      boost::system::error_code ec;
      co_await http::async_read(sock, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      deadline.cancel();
      if (ec) {
        if (ec != http::error::end_of_stream && ec != asio::error::eof && socket_open(sock)) {
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
      const WsOpener* ws_route = router.websocket(req.path);
      if (!response && ws_route != nullptr && req.method == "GET" && ws::wants_upgrade(req.websocket)) {
        // The gate has admitted it like any request; the socket is the WebSocket's from here.
        if (co_await websocket_handshake(sock, req, ec)) {
          auto early = buffer.data();
          std::string_view early_bytes(static_cast<const char*>(early.data()), early.size());
          co_await websocket(sock, early_bytes, req, *ws_route);
        }
        co_return;
      }
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
      // A refused upgrade ends the connection: the client asked to leave
      // HTTP, and what it sends next is not ours to guess.
      bool keep = msg.keep_alive() && !ws::wants_upgrade(req.websocket);
      co_await write(sock, *response, keep, ec);
      if (!ec && !keep) co_await finish(sock);
      if (ec || !keep) co_return;
    }
  }

  // A connection to the TLS listener: the handshake, then the same session
  // as plain HTTP. A client speaking plain HTTP here is told to use https
  // (in plain HTTP, since that is what it reads) and the connection ends.
  asio::awaitable<void> tls_session(TcpSocket raw) {
    auto self = shared_from_this();
    TlsStream stream(std::move(raw), tls->context());
    boost::beast::flat_buffer buffer;
    asio::steady_timer deadline(io);
    deadline.expires_after(std::chrono::seconds(limits.request_timeout_s));
    deadline.async_wait([&stream](boost::system::error_code ec) {
      if (!ec) close_socket(stream);
    });
    boost::system::error_code ec;
    bool is_tls = co_await boost::beast::async_detect_ssl(stream.next_layer(), buffer,
                                                          asio::redirect_error(asio::use_awaitable, ec));
    if (!ec && !is_tls) {
      http::request_parser<http::string_body> parser;
      limit_parser(parser, limits);
      co_await http::async_read(stream.next_layer(), buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      deadline.cancel();
      if (ec) co_return;
      // Built outside the co_await: GCC 12 miscompiles braced lists in one.
      Response https_only = plain_http_refusal();
      co_await write(stream.next_layer(), https_only, false, ec);
      co_return;
    }
    size_t used = 0;
    if (!ec) {
      used = co_await stream.async_handshake(asio::ssl::stream_base::server, buffer.data(),
                                             asio::redirect_error(asio::use_awaitable, ec));
    }
    deadline.cancel();
    if (ec) co_return;  // not TLS we can speak, or the client gave up: nothing to answer
    buffer.consume(used);
    co_await session(std::move(stream), Transport::kTcp);
  }

  Response plain_http_refusal() const {
    std::string url = auth.base_url();
    return Response::json(400, {{"error",
                                 {{"code", "invalid_argument"},
                                  {"message", "this port serves the yonderd API over HTTPS only; use " +
                                                  (url.empty() ? std::string("https://HOST:PORT") : url)}}}});
  }

  // Before a connection closes by our choice: TLS says so (close_notify,
  // and a short wait for the client's); plain sockets need nothing.
  template <class Sock>
  asio::awaitable<void> finish(Sock& sock) {
    if constexpr (std::is_same_v<Sock, TlsStream>) {
      asio::steady_timer deadline(io);
      deadline.expires_after(std::chrono::seconds(2));
      deadline.async_wait([&sock](boost::system::error_code ec) {
        if (!ec) close_socket(sock);
      });
      boost::system::error_code ec;
      co_await sock.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
      deadline.cancel();
    }
    co_return;
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

Result<int> LocalApiServer::listen_tcp(const std::string& host, uint16_t port, std::shared_ptr<ApiTls> tls) {
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
  // The names Host and Origin may carry: those that reach this socket.
  std::vector<std::string> hosts;
  auto add = [&hosts](const std::string& h) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  auto add_loopback = [&add] {
    for (const char* h : {"127.0.0.1", "localhost", "[::1]"}) add(h);
  };
  auto add_certificate_names = [&add, &tls] {
    if (tls) {
      for (const auto& n : tls->names()) add(n);
    }
  };
  if (address.is_unspecified()) {
    add_certificate_names();  // the name to show first: clients verify it
    add_loopback();
  } else {
    add(address.is_v6() ? "[" + address.to_string() + "]" : address.to_string());
    if (address.is_loopback()) add_loopback();
    add_certificate_names();
  }
  impl_->tls = std::move(tls);
  impl_->auth.set_tcp_listener(bound, impl_->tls != nullptr, std::move(hosts));
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
