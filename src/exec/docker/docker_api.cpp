#include "exec/docker/docker_api.h"

#include "exec/docker/docker_json.h"
#include "os/unix_http.h"

namespace yonder::exec::docker {

std::string url_encode(std::string_view value) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

Error DockerApi::reply_error(int status, std::string_view body, const std::string& what) const {
  std::string message = "Docker refused to " + what + " (HTTP " + std::to_string(status) + "): " + parse_error_message(body);
  ErrorCode code = status == 404   ? ErrorCode::kNotFound
                   : status == 409 ? ErrorCode::kFailedPrecondition
                   : status == 400 ? ErrorCode::kInvalidArgument
                                   : ErrorCode::kInternal;
  return make_error(code, message);
}

Error DockerApi::unreachable(const Error& cause) const {
  return make_error(ErrorCode::kUnavailable,
                    "the Docker engine at " + socket_ + " does not answer (" + cause.message() +
                        "); start dockerd (scripts/services.sh) or set docker.socket to the engine's socket");
}

Result<ApiReply> DockerApi::call(std::string_view method, const std::string& path, const std::string& what,
                                 std::string_view body, std::chrono::milliseconds timeout) {
  os::HttpRequestOptions options;
  options.timeout = timeout;
  options.max_body = kMaxJsonBody;
  auto r = os::unix_http_request(socket_, method, std::string(kApiPrefix) + path, body, options);
  if (!r) {
    if (r.error().code() == ErrorCode::kUnavailable) return unreachable(r.error());
    return Error(r.error()).with_context(what);
  }
  if (r->status < 200 || r->status > 299) return reply_error(r->status, r->body, what);
  return ApiReply{r->status, std::move(r->body)};
}

Result<std::unique_ptr<os::HttpStream>> DockerApi::stream(std::string_view method, const std::string& path,
                                                          const std::string& what, std::string body, bool upgrade) {
  os::HttpStreamRequest req;
  req.method = std::string(method);
  req.target = std::string(kApiPrefix) + path;
  req.body = std::move(body);
  req.upgrade = upgrade;
  auto s = os::HttpStream::open(socket_, req);
  if (!s) {
    if (s.error().code() == ErrorCode::kUnavailable) return unreachable(s.error());
    return Error(s.error()).with_context(what);
  }
  int status = (*s)->status();
  if (status == 101 || (status >= 200 && status <= 299)) return s;
  auto text = (*s)->read_all(64 * 1024, std::chrono::seconds(10));
  return reply_error(status, text ? *text : std::string(), what);
}

}  // namespace yonder::exec::docker
