#include "cli/daemon_api.h"

#include "os/unix_http.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

}  // namespace

Result<json> api(const Context& ctx, const std::string& method, const std::string& path, const json& body,
                 std::chrono::milliseconds timeout, int interrupt_fd) {
  os::HttpRequestOptions opts;
  opts.timeout = timeout;
  opts.interrupt_fd = interrupt_fd;
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), method, path, body.is_null() ? std::string() : body.dump(), opts);
  if (!r) return std::move(r).error();
  auto j = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    if (j.is_object() && j.contains("error") && j["error"].is_object()) {
      return make_error(error_code_from_name(j["error"].value("code", "")),
                        j["error"].value("message", "yonderd refused the request"));
    }
    return make_error(ErrorCode::kInternal, "yonderd answered HTTP " + std::to_string(r->status));
  }
  if (!j.is_object()) return make_error(ErrorCode::kInternal, "yonderd sent a reply that is not JSON");
  return j;
}

std::string query_escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
        c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool no_daemon(const Error& e) {
  return e.code() == ErrorCode::kUnavailable && e.message().rfind("cannot connect to", 0) == 0;
}

int fail(const Context& ctx, const Error& e, int code) {
  if (no_daemon(e)) return report_daemon_error(ctx, e);
  if (e.code() == ErrorCode::kPermissionDenied && code == kExitError) code = kExitDenied;
  return print_error(e, code);
}

}  // namespace yonder::cli
