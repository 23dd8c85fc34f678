#include "base/terminal_text.h"
#include "cli/context.h"

#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "cli/exit_codes.h"

namespace yonder::cli {

std::string Context::socket_path() const {
  std::string s = cfg.get("api.socket");
  return s.empty() ? paths.default_socket() : s;
}

Result<Context> make_context() {
  Context ctx;
  ctx.env = config::process_env();
  auto paths = config::resolve_paths(ctx.env);
  if (!paths) return std::move(paths).error();
  // No node of one's own but the system daemon's (the .deb's yonderd.service):
  // talk to that one, as root or a member of the group yonder.
  ctx.paths = config::prefer_system_node(*paths, ctx.env, [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
  });
  bool system_node = ctx.paths.home != paths->home;
  auto cfg = config::Config::load(ctx.paths.config_file);
  if (!cfg && !(system_node && cfg.error().code() == ErrorCode::kPermissionDenied)) return std::move(cfg).error();
  // The system node's config.toml is private to the user yonder; its members
  // need only the default socket and the token, so defaults do.
  if (cfg) ctx.cfg = std::move(*cfg);
  YONDER_TRY(ctx.cfg.apply_env(ctx.env));
  if (auto token = api::read_api_token(ctx.paths.api_token_file())) ctx.api_token = std::move(*token);
  return ctx;
}

int print_error(const Error& e, int exit_code) {
  // An error may carry a peer's words (a provider's refusal): made safe.
  std::fprintf(stderr, "yonder: %s\n", terminal_safe(e.to_string(), true).c_str());
  return exit_code;
}

Result<DaemonReply> call_daemon(const Context& ctx, std::string_view method, std::string_view path,
                                std::string_view body) {
  os::HttpRequestOptions opts;
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), method, path, body, opts);
  if (!r) return std::move(r).error();
  return DaemonReply{r->status, std::move(r->body)};
}

int report_daemon_error(const Context& ctx, const Error& e) {
  if (e.code() == ErrorCode::kUnavailable) {
    std::fprintf(stderr,
                 "yonder: yonderd is not running for %s (no answer on %s).\n"
                 "        Start it with: yonderd &   (set YONDER_HOME to pick another node)\n",
                 ctx.paths.home.c_str(), ctx.socket_path().c_str());
    return kExitNoDaemon;
  }
  return print_error(e, kExitError);
}

Error daemon_error(const DaemonReply& reply) {
  auto j = nlohmann::json::parse(reply.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return make_error(ErrorCode::kInternal, j["error"]["message"].get<std::string>());
  }
  return make_error(ErrorCode::kInternal, "yonderd answered HTTP " + std::to_string(reply.status) +
                                              "; see its log for details");
}

}  // namespace yonder::cli
