// GET /metrics: the relay's counters in Prometheus text format, over HTTP/1.1
// with Boost.Beast. One request per connection, a header limit and a
// deadline, so a scraper (or anyone who can reach the port) holds nothing.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "relay/server_impl.h"

namespace yonder::relay {
namespace beast = boost::beast;
namespace http = beast::http;

MetricsHttp::MetricsHttp(asio::io_context& io, std::function<std::string()> render)
    : io_(io), acceptor_(io), render_(std::move(render)) {}

Status MetricsHttp::listen(const std::string& host_port) {
  auto ep = parse_listen_address(host_port, "--metrics");
  if (!ep) return std::move(ep).error();
  boost::system::error_code ec;
  acceptor_.open(ep->protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(*ep, ec);
  if (!ec) acceptor_.listen(64, ec);
  if (ec) {
    return make_error(ErrorCode::kUnavailable, "cannot serve metrics on " + host_port + ": " + ec.message() +
                                                   "; choose a free address with --metrics (or --metrics off)");
  }
  accept_next();
  return ok_status();
}

tcp::endpoint MetricsHttp::endpoint() const {
  boost::system::error_code ec;
  return acceptor_.local_endpoint(ec);
}

void MetricsHttp::stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

void MetricsHttp::accept_next() {
  auto self = shared_from_this();
  acceptor_.async_accept([this, self](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      struct Exchange {
        explicit Exchange(tcp::socket s) : stream(std::move(s)) {}
        beast::tcp_stream stream;
        beast::flat_buffer buffer{8 * 1024};
        http::request_parser<http::empty_body> parser;
        http::response<http::string_body> response;
      };
      auto x = std::make_shared<Exchange>(std::move(socket));
      x->parser.header_limit(8 * 1024);
      x->parser.body_limit(0);
      x->stream.expires_after(std::chrono::seconds(5));
      http::async_read(x->stream, x->buffer, x->parser, [this, self, x](beast::error_code rec, size_t) {
        if (rec) return;
        const auto& req = x->parser.get();
        auto& res = x->response;
        res.version(11);
        res.keep_alive(false);
        std::string target(req.target());
        if (req.method() != http::verb::get) {
          res.result(http::status::method_not_allowed);
          res.body() = "GET only\n";
        } else if (target == "/metrics") {
          res.result(http::status::ok);
          res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
          res.body() = render_();
        } else {
          res.result(http::status::not_found);
          res.body() = "the relay's counters are at /metrics\n";
        }
        res.prepare_payload();
        http::async_write(x->stream, res, [x](beast::error_code, size_t) {
          beast::error_code ignored;
          x->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        });
      });
    }
    accept_next();
  });
}

}  // namespace yonder::relay
