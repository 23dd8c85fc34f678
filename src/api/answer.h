// How a feature answers a typed C++ call and how a route adapts it: an
// Answer gets the JSON a route would send, or the error. A feature's
// service takes (arguments, Answer); its route parses the request and
// hands the service answer_with(reply), so other features call the
// service directly and nothing goes through a route in-process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "api/server.h"
#include "base/error.h"

namespace yonder::api {

using Answer = std::function<void(Result<nlohmann::json>)>;

// A route's Reply as an Answer: 200 with the JSON, or the error's status.
inline Answer answer_with(Reply reply) {
  return [reply = std::move(reply)](Result<nlohmann::json> r) {
    reply(r ? Response::json(200, *r) : Response::error(r.error()));
  };
}

// A request's body as JSON; a discarded value (is_discarded()) when it is
// not JSON, which every service's checks refuse as not an object.
inline nlohmann::json body_json(const Request& req) {
  return nlohmann::json::parse(req.body, nullptr, false);
}

// A whole-number field of a body: `def` when absent; an error naming the
// field when it is not a whole number in 0..max. Any JSON integer counts,
// signed or not: a body a feature builds in C++ ({"retries", 0}) holds a
// signed one where the same body parsed from text holds an unsigned one.
inline Result<uint64_t> body_uint(const nlohmann::json& b, const char* key, uint64_t def, uint64_t max) {
  if (!b.is_object() || !b.contains(key)) return def;
  const nlohmann::json& v = b[key];
  bool whole = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  if (!whole || v.get<uint64_t>() > max) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("\"") + key + "\" must be a whole number up to " + std::to_string(max));
  }
  return v.get<uint64_t>();
}

}  // namespace yonder::api
