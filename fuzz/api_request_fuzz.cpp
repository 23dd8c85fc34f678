// Fuzzes what the local API decodes from a client before any handler runs
// (api/request_parse.h, api/auth.h): Beast's request parser under the
// server's limits, the gate's header reading (bearer, cookie, origin, host),
// the gate itself (with a fixed token and a one-time login code), query
// strings and JSON bodies (api::parse_json_body).
#include <utility>  // before Boost (GCC 12)

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/auth.h"
#include "api/request_parse.h"
#include "api/server.h"

using namespace yonder;
using namespace yonder::api;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The body decoder alone, on the raw input.
  auto j = parse_json_body(bytes);
  if (j.ok() && !j->is_object()) __builtin_trap();
  (void)parse_query(bytes);
  (void)cookie_value(bytes, kSessionCookie);
  (void)bearer_token(bytes);

  // The whole request, as the server reads it.
  http::request_parser<http::string_body> parser;
  limit_parser(parser, ServerLimits{});
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (!ec && parser.is_header_done() && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  auto msg = parser.release();
  for (Transport t : {Transport::kUnix, Transport::kTcp}) {
    HttpRequestMessage copy = msg;
    Request req = request_from_message(copy, t);
    ApiAuth auth("fuzz-token", "api-token", [](std::span<uint8_t> out) {
      for (auto& b : out) b = 7;
    });
    auth.set_tcp_port(7860);
    auto now = std::chrono::steady_clock::time_point{};
    (void)auth.issue_login_code(now);
    auto answer = auth.admit(req, now);
    if (answer && answer->status != 303 && answer->status < 400) __builtin_trap();
    if (!answer && req.auth == AuthKind::kNone) __builtin_trap();  // admitted means authenticated
    (void)parse_json_body(req.body);
    (void)parse_query(req.query);
  }
  return 0;
}
