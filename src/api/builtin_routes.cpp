#include "api/builtin_routes.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/auth.h"
#include "api/dashboard_assets.h"

namespace yonder::api {

namespace {

// The dashboard's pages run only our own script and talk only to this API:
// no inline script or style, no framing, no referrer. (The server adds
// X-Frame-Options DENY, nosniff and no-store to every response.)
void add_page_headers(Response& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                         "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                         "frame-ancestors 'none'");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

Response asset_response(std::string_view name) {
  for (const DashboardAsset& a : dashboard_assets()) {
    if (a.name == name) {
      Response r(200, std::string(a.body), std::string(a.content_type));
      add_page_headers(r);
      return r;
    }
  }
  return Response::json(404, {{"error",
                               {{"code", "not_found"},
                                {"message", "the dashboard has no file " + std::string(name) +
                                                "; rebuild yonderd (web/dashboard is compiled in)"}}}});
}

}  // namespace

Response dashboard_page() {
  return asset_response("index.html");
}

void add_builtin_routes(Router& router, ApiAuth& auth) {
  router.add("GET", "/", [](const Request&, Reply reply) { reply(dashboard_page()); });
  // One route per file: the router matches exact paths (api/server.h).
  router.add("GET", "/assets/app.js", [](const Request&, Reply reply) { reply(asset_response("app.js")); });
  router.add("GET", "/assets/charts.js", [](const Request&, Reply reply) { reply(asset_response("charts.js")); });
  router.add("GET", "/assets/style.css", [](const Request&, Reply reply) { reply(asset_response("style.css")); });
  // The charting library, from npm (web/dashboard/package.json).
  router.add("GET", "/assets/uplot.js", [](const Request&, Reply reply) {
    reply(asset_response("node_modules/uplot/dist/uPlot.iife.min.js"));
  });
  router.add("GET", "/assets/uplot.css", [](const Request&, Reply reply) {
    reply(asset_response("node_modules/uplot/dist/uPlot.min.css"));
  });

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
