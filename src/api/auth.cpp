#include "api/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include <boost/asio/ip/address.hpp>

#include "api/request_parse.h"
#include "base/bytes.h"

namespace yonder::api {

void system_random(std::span<uint8_t> out) {
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) std::abort();  // no randomness: nothing is safe
}

std::string random_base64url(const RandomFn& random, size_t bytes) {
  Bytes raw(bytes);
  random(raw);
  std::string s = base64_encode(raw);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return s;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {

constexpr size_t kTokenBytes = 32;

bool token_chars_ok(std::string_view t) {
  return !t.empty() && t.size() <= 256 && std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

}  // namespace

Result<std::string> read_api_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return make_error(ErrorCode::kNotFound, "cannot read the API token " + path +
                                                "; start yonderd once (it creates the token) or run `yonder init`");
  }
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (!token_chars_ok(line)) {
    return make_error(ErrorCode::kDataLoss,
                      "the API token " + path + " is not a token; delete it and restart yonderd to make a new one");
  }
  return line;
}

Result<std::string> ensure_api_token(const std::string& path, const RandomFn& random) {
  if (::access(path.c_str(), F_OK) == 0) return read_api_token(path);
  std::string token = random_base64url(random, kTokenBytes);
  // Written whole to a private temporary, then linked into place: readers
  // never see a partial token, and a racing creator's token wins intact.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return make_error(ErrorCode::kUnavailable, "cannot create " + tmp + ": " + std::strerror(errno) +
                                                   "; check that the state folder is writable");
  }
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (ok && ::link(tmp.c_str(), path.c_str()) != 0) ok = errno == EEXIST;
  ::unlink(tmp.c_str());
  if (!ok) return make_error(ErrorCode::kUnavailable, "cannot write the API token " + path);
  return read_api_token(path);
}

Response unauthenticated(const std::string& message) {
  Response r = Response::json(401, {{"error", {{"code", "unauthenticated"}, {"message", message}}}});
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"yonderd\"");
  return r;
}

namespace {

Response forbidden(const std::string& message) {
  return Response::json(403, {{"error", {{"code", "permission_denied"}, {"message", message}}}});
}

}  // namespace

ApiAuth::ApiAuth(std::string token, std::string token_file, RandomFn random, AuthLimits limits)
    : token_(std::move(token)), token_file_(std::move(token_file)), random_(std::move(random)), limits_(limits) {}

void ApiAuth::set_tcp_port(int port) { set_tcp_listener(port, false, {"127.0.0.1", "localhost", "[::1]"}); }

void ApiAuth::set_tcp_listener(int port, bool tls, std::vector<std::string> hosts) {
  tcp_port_ = port;
  tls_ = tls;
  hosts_ = std::move(hosts);
}

std::string ApiAuth::base_url() const {
  if (tcp_port_ <= 0) return "";
  return std::string(tls_ ? "https://" : "http://") + (hosts_.empty() ? "127.0.0.1" : hosts_.front()) + ":" +
         std::to_string(tcp_port_);
}

bool ApiAuth::origin_allowed(std::string_view origin) const {
  if (tcp_port_ <= 0) return false;
  std::string scheme = tls_ ? "https://" : "http://";
  if (origin.substr(0, scheme.size()) != scheme) return false;
  return host_allowed(origin.substr(scheme.size()));
}

bool ApiAuth::host_allowed(std::string_view host) const {
  if (tcp_port_ <= 0) return false;
  std::string port = std::to_string(tcp_port_);
  // Browsers leave out the scheme's default port.
  bool default_port = tcp_port_ == (tls_ ? 443 : 80);
  for (const auto& h : hosts_) {
    if (host == h + ":" + port || (default_port && host == h)) return true;
  }
  return false;
}

void ApiAuth::expire(std::vector<Entry>& entries, Clock::time_point now) {
  std::erase_if(entries, [now](const Entry& e) { return now >= e.expires; });
}

std::vector<ApiAuth::Entry>::iterator ApiAuth::find(std::vector<Entry>& entries, std::string_view secret) {
  // Every entry is compared, so the time taken does not tell which matched.
  auto found = entries.end();
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (constant_time_equal(it->secret, secret)) found = it;
  }
  return found;
}

std::string ApiAuth::issue_login_code(Clock::time_point now) {
  expire(codes_, now);
  if (codes_.size() >= limits_.max_login_codes) codes_.erase(codes_.begin());
  std::string code = random_base64url(random_, 24);
  codes_.push_back({code, now + limits_.login_code_ttl});
  return code;
}

Response ApiAuth::login(const Request& req, Clock::time_point now) {
  if (req.method != "GET") {
    return Response::json(405, {{"error", {{"code", "method_not_allowed"}, {"message", "use GET /login?code=..."}}}});
  }
  std::string code = parse_query(req.query)["code"];
  auto it = find(codes_, code);
  if (code.empty() || it == codes_.end()) {
    return unauthenticated(
        "this login link is not valid or was already used (each works once); run "
        "`yonder dashboard` for a new one");
  }
  bool expired = now >= it->expires;
  codes_.erase(it);  // single use, expired or not
  if (expired) {
    return unauthenticated("this login link has expired (it works for " +
                           std::to_string(limits_.login_code_ttl.count()) +
                           " s); run `yonder dashboard` for a new one");
  }
  expire(sessions_, now);
  if (sessions_.size() >= limits_.max_sessions) sessions_.erase(sessions_.begin());
  std::string session = random_base64url(random_, 32);
  sessions_.push_back({session, now + limits_.session_ttl});
  Response r(303, "", "text/plain; charset=utf-8");
  r.headers.emplace_back("Location", "/");
  r.headers.emplace_back(
      "Set-Cookie", std::string(kSessionCookie) + "=" + session +
                        "; HttpOnly; SameSite=Strict; Path=/; Max-Age=" + std::to_string(limits_.session_ttl.count()));
  return r;
}

std::optional<Response> ApiAuth::admit(Request& req, Clock::time_point now) {
  req.auth = AuthKind::kNone;
  bool tcp = req.transport == Transport::kTcp;
  // Browsers first: a page from elsewhere gets nothing, whatever it holds.
  if (tcp && !host_allowed(req.host)) {
    return forbidden("Host \"" + req.host + "\" is not this API's; open " + base_url() + " instead");
  }
  if (!req.origin.empty() && !origin_allowed(req.origin)) {
    return forbidden("cross-origin requests are refused (Origin " + req.origin +
                     "); use the dashboard at the API's own address, e.g. " +
                     (base_url().empty() ? std::string("http://127.0.0.1:PORT") : base_url()));
  }
  if (!req.sec_fetch_site.empty() && req.sec_fetch_site != "same-origin" && req.sec_fetch_site != "none") {
    return forbidden("the browser marked this request " + req.sec_fetch_site +
                     "; the API answers only its own pages and addresses typed or opened directly");
  }
  if (tcp && req.path == "/login") return login(req, now);

  std::string how = "send `Authorization: Bearer TOKEN` with the token in " + token_file_ +
                    " (the yonder CLI and clients/python do this), or open the dashboard with `yonder dashboard`";
  if (!req.authorization.empty()) {
    auto presented = bearer_token(req.authorization);
    if (!presented || !constant_time_equal(*presented, token_)) {
      return unauthenticated("wrong API token; " + how +
                             ". If the token file was replaced, restart yonderd so it reads the new one");
    }
    req.auth = AuthKind::kToken;
    return std::nullopt;
  }
  if (tcp && !req.cookie.empty()) {
    if (auto session = cookie_value(req.cookie, kSessionCookie)) {
      expire(sessions_, now);
      if (find(sessions_, *session) == sessions_.end()) {
        return unauthenticated(
            "your dashboard session has ended (yonderd restarted or it expired); run "
            "`yonder dashboard` to log in again");
      }
      // A session rides on a cookie the browser adds by itself, so changes
      // must also show they come from our own page.
      // Browsers always send Origin on WebSocket handshakes (RFC 6455 4.1), and
      // a socket outlives the request: the same rule as for changes.
      bool upgrade = ws::wants_upgrade(req.websocket);
      if (((req.method != "GET" && req.method != "HEAD") || upgrade) && req.origin.empty()) {
        return forbidden("a dashboard session must send its Origin header with " +
                         (upgrade ? std::string("WebSocket") : req.method) + " requests");
      }
      req.auth = AuthKind::kSession;
      return std::nullopt;
    }
  }
  return unauthenticated("this API needs the node's API token; " + how);
}

Result<std::optional<ListenAddress>> parse_api_listen(std::string_view text, bool tls) {
  if (text == "off" || text.empty()) return std::optional<ListenAddress>();
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "api.listen must be HOST:PORT (e.g. 127.0.0.1:7860, port 0 picks one) or off, not " + std::string(text));
  }
  std::string host(text.substr(0, colon));
  std::string port_text(text.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  if (port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port_text) > 65535) {
    return make_error(ErrorCode::kInvalidArgument, "api.listen: " + port_text + " is not a port (0-65535)");
  }
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(host, ec);
  if (ec) {
    return make_error(ErrorCode::kInvalidArgument,
                      "api.listen: " + host + " is not an IP address; use 127.0.0.1:PORT, or off");
  }
  if (!address.is_loopback() && !tls) {
    return make_error(ErrorCode::kPermissionDenied,
                      "api.listen = " + std::string(text) +
                          " is not a loopback address: the API would be reachable from the network, which "
                          "yonderd allows only over TLS. Set api.tls_cert and api.tls_key to a PEM certificate "
                          "and its private key (docs/api.md, \"Serving beyond this host\"), or use "
                          "127.0.0.1:PORT (reach it from elsewhere through an SSH tunnel: ssh -L "
                          "7860:127.0.0.1:7860 THIS-HOST) or off");
  }
  ListenAddress out;
  out.loopback = address.is_loopback();
  out.host = address.to_string();
  out.port = static_cast<uint16_t>(std::stoi(port_text));
  return std::optional<ListenAddress>(out);
}

}  // namespace yonder::api
