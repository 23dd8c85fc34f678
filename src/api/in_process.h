// Calling a local API route's logic from C++ (mesh/jobs/mesh_jobs.h drives the
// lease, fetch and job routes of other services this way, without HTTP):
// `reply_to` turns a route's Reply into a callback that gets the answer's
// JSON, or its {"error": {"code", "message"}} back as an Error.
#pragma once

#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "api/server.h"
#include "base/error.h"

namespace yonder::api {

inline Result<nlohmann::json> result_of(const api::Response& r) {
  auto body = nlohmann::json::parse(r.body, nullptr, false);
  if (r.status >= 200 && r.status < 300) {
    if (body.is_discarded())
      return make_error(ErrorCode::kInternal, "a local route answered something that is not JSON");
    return body;
  }
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& e = body["error"];
    return make_error(error_code_from_name(e.value("code", "")), e.value("message", "failed"));
  }
  return make_error(ErrorCode::kInternal, "a local route failed with HTTP " + std::to_string(r.status));
}

inline api::Reply reply_to(std::function<void(Result<nlohmann::json>)> answer) {
  return [answer = std::move(answer)](api::Response r) { answer(result_of(r)); };
}

// A POST request carrying `body`, as a route handler receives it.
inline api::Request local_post(const std::string& path, const nlohmann::json& body) {
  api::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  return req;
}

}  // namespace yonder::api
