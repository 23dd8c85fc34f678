// The API's own routes, added to every server's router:
//   GET  /                    the dashboard (web/dashboard, compiled in;
//                             a session cookie or the token)
//   GET  /assets/app.js, /assets/style.css   its script and style sheet
//   POST /v1/dashboard/login  a one-time login URL (bearer token only)
//   GET  /v1/routes           every route, for clients and the tests that keep
//                             docs/openapi.yaml honest
// GET /login itself is answered by the gate (api/auth.h), before routing.
#pragma once

#include "api/server.h"

namespace yonder::api {

class ApiAuth;

// `auth` must outlive the router.
void add_builtin_routes(Router& router, ApiAuth& auth);

// The dashboard's entry page (index.html), with its security headers
// (Content-Security-Policy without inline script, X-Frame-Options DENY).
Response dashboard_page();

}  // namespace yonder::api
