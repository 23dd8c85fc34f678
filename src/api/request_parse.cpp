#include "api/request_parse.h"

#include <cctype>

namespace yonder::api {
namespace http = boost::beast::http;

Request request_from_message(HttpRequestMessage& msg, Transport transport) {
  Request req;
  req.method = std::string(msg.method_string());
  std::string target(msg.target());
  size_t q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos) req.query = target.substr(q + 1);
  req.body = std::move(msg.body());
  req.authorization = std::string(msg[http::field::authorization]);
  req.cookie = std::string(msg[http::field::cookie]);
  req.origin = std::string(msg[http::field::origin]);
  req.host = std::string(msg[http::field::host]);
  req.sec_fetch_site = std::string(msg["Sec-Fetch-Site"]);
  req.websocket.upgrade = std::string(msg[http::field::upgrade]);
  req.websocket.connection = std::string(msg[http::field::connection]);
  req.websocket.key = std::string(msg[http::field::sec_websocket_key]);
  req.websocket.version = std::string(msg[http::field::sec_websocket_version]);
  req.transport = transport;
  return req;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  size_t start = 0;
  for (int seen = 0; start <= header.size() && seen < 32; ++seen) {
    size_t semi = header.find(';', start);
    std::string_view part =
        trim(header.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start));
    size_t eq = part.find('=');
    if (eq != std::string_view::npos && trim(part.substr(0, eq)) == name) return std::string(trim(part.substr(eq + 1)));
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return std::nullopt;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  std::string_view a = trim(authorization);
  constexpr std::string_view kScheme = "bearer ";
  if (a.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != kScheme[i]) return std::nullopt;
  }
  std::string_view token = trim(a.substr(kScheme.size()));
  if (token.empty()) return std::nullopt;
  return token;
}

}  // namespace yonder::api
