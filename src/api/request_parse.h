// Turning untrusted request bytes into an api::Request: Boost.Beast's parser
// with our size limits, then the few headers the gate reads. Shared by the
// server and fuzz/api_request_fuzz.cpp so the fuzzer runs the same code.
#pragma once

#include <utility>  // before Boost (GCC 12)

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/server.h"

namespace yonder::api {

using HttpRequestMessage = boost::beast::http::request<boost::beast::http::string_body>;

inline void limit_parser(boost::beast::http::request_parser<boost::beast::http::string_body>& parser,
                         const ServerLimits& limits) {
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
}

// Method, path/query split, body and the gate's headers.
Request request_from_message(HttpRequestMessage& msg, Transport transport);

// The value of cookie `name` in a Cookie header ("a=1; b=2"); nullopt when
// absent. At most 32 cookies are looked at.
std::optional<std::string> cookie_value(std::string_view header, std::string_view name);

// The token of "Bearer TOKEN" (scheme case-insensitive); nullopt otherwise.
std::optional<std::string_view> bearer_token(std::string_view authorization);

}  // namespace yonder::api
