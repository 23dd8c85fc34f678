#include "api/builtin_routes.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "api/auth.h"

namespace yonder::api {

Response dashboard_page() {
  return Response(200,
                  "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                  "<title>Yonder</title></head><body>"
                  "<h1>Yonder</h1><p id=\"placeholder\">You are logged in to this node's yonderd. "
                  "The dashboard is not built yet; the API is documented in docs/openapi.yaml.</p>"
                  "</body></html>\n",
                  "text/html; charset=utf-8");
}

void add_builtin_routes(Router& router, ApiAuth& auth) {
  router.add("GET", "/", [](const Request&, Reply reply) { reply(dashboard_page()); });

  router.add("POST", "/v1/dashboard/login", [&auth](const Request& req, Reply reply) {
    if (req.auth != AuthKind::kToken) {
      return reply(Response::json(403, {{"error",
                                         {{"code", "permission_denied"},
                                          {"message",
                                           "login links are made with the API token "
                                           "(`yonder dashboard`), not from a browser session"}}}}));
    }
    if (auth.tcp_port() <= 0) {
      return reply(
          Response::json(409, {{"error",
                                {{"code", "failed_precondition"},
                                 {"message",
                                  "the API does not listen on TCP (api.listen = off), so there is no "
                                  "dashboard to open; set api.listen to 127.0.0.1:7860 and restart yonderd"}}}}));
    }
    std::string code = auth.issue_login_code(std::chrono::steady_clock::now());
    reply(Response::json(
        200, {{"url", auth.base_url() + "/login?code=" + code}, {"expires_in_s", auth.login_code_ttl().count()}}));
  });

  router.add("GET", "/v1/routes", [](const Request& req, Reply reply) {
    nlohmann::json arr = nlohmann::json::array();
    if (req.router != nullptr) {
      for (const auto& [method, path] : req.router->routes()) arr.push_back({{"method", method}, {"path", path}});
    }
    reply(Response::json(200, {{"routes", arr}}));
  });
}

}  // namespace yonder::api
