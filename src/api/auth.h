// Who may use the local API, decided before any route runs.
//
// Every request on every listener (the unix socket and the loopback TCP
// port) must prove it holds the node's API token: either
//   - `Authorization: Bearer TOKEN` (the CLI, scripts, the Python client,
//     Prometheus), the token being $YONDER_HOME/api-token (mode 0600), or
//   - a session cookie a browser got from a one-time login URL: the CLI asks
//     for a code (POST /v1/dashboard/login, bearer only), prints
//     http://127.0.0.1:PORT/login?code=CODE, and GET /login trades the code
//     (single use, short-lived) for `yonder_session` (HttpOnly,
//     SameSite=Strict), then redirects to the dashboard at /.
// Browsers are also held to the API's own origin: a request whose Origin
// is not SCHEME://HOST:PORT for one of the TCP listener's host names
// (http://127.0.0.1:PORT or http://localhost:PORT on loopback; with TLS,
// https:// and the bound address or the names in the certificate) is
// refused (403), as is one whose Host is not this API's (DNS rebinding) or
// that a browser marks cross-site (Sec-Fetch-Site); a cookie session must
// send a matching Origin on anything but GET/HEAD.
//
// Sans-I/O: the caller passes `now` and the random source; the server calls
// `admit` on its io thread only (not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/server.h"
#include "base/error.h"

namespace yonder::api {

using RandomFn = std::function<void(std::span<uint8_t>)>;
// The system's CSPRNG (OpenSSL RAND_bytes); aborts if it has none.
void system_random(std::span<uint8_t> out);
// `bytes` random bytes as unpadded base64url (RFC 4648 section 5).
std::string random_base64url(const RandomFn& random, size_t bytes);
// Equal strings, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// The token file: one line, 32 random bytes base64url. `ensure` creates it
// (mode 0600, atomically) when missing and returns the token either way.
Result<std::string> read_api_token(const std::string& path);
Result<std::string> ensure_api_token(const std::string& path, const RandomFn& random);

inline constexpr std::string_view kSessionCookie = "yonder_session";

struct AuthLimits {
  std::chrono::seconds login_code_ttl{60};
  std::chrono::seconds session_ttl{12 * 3600};
  size_t max_login_codes = 16;  // outstanding; the oldest is dropped beyond
  size_t max_sessions = 64;     // the least recently issued is dropped beyond
};

class ApiAuth {
 public:
  using Clock = std::chrono::steady_clock;
  // `token_file` is only named in refusals, never read here.
  ApiAuth(std::string token, std::string token_file, RandomFn random, AuthLimits limits = {});

  // The bound loopback TCP port (0: no TCP listener), plain HTTP; sets the
  // allowed origins (127.0.0.1, localhost, [::1]).
  void set_tcp_port(int port);
  // The TCP listener: its port, whether it speaks TLS, and the host names
  // (as in a Host header: IPv6 in brackets, no port) that Host and Origin
  // may name; the first is the one base_url() shows.
  void set_tcp_listener(int port, bool tls, std::vector<std::string> hosts);
  int tcp_port() const { return tcp_port_; }
  bool tls() const { return tls_; }
  // http://127.0.0.1:PORT (https://HOST:PORT with TLS), or "" without a TCP listener.
  std::string base_url() const;

  // The gate. Returns the response when the request is answered here (a
  // refusal, or GET /login); otherwise sets req.auth and returns nullopt.
  std::optional<Response> admit(Request& req, Clock::time_point now);

  // A one-time login code (single use, limits.login_code_ttl).
  std::string issue_login_code(Clock::time_point now);
  std::chrono::seconds login_code_ttl() const { return limits_.login_code_ttl; }

 private:
  struct Entry {
    std::string secret;
    Clock::time_point expires;
  };
  Response login(const Request& req, Clock::time_point now);
  bool origin_allowed(std::string_view origin) const;
  bool host_allowed(std::string_view host) const;
  static void expire(std::vector<Entry>& entries, Clock::time_point now);
  static std::vector<Entry>::iterator find(std::vector<Entry>& entries, std::string_view secret);

  std::string token_;
  std::string token_file_;
  RandomFn random_;
  AuthLimits limits_;
  int tcp_port_ = 0;
  bool tls_ = false;
  std::vector<std::string> hosts_;
  std::vector<Entry> codes_;
  std::vector<Entry> sessions_;
};

// The refusal every unauthenticated request gets: 401 with a JSON error
// saying where the token is and how to send it.
Response unauthenticated(const std::string& message);

// api.listen: "off" (nullopt), or HOST:PORT with HOST an IP literal or
// localhost ("127.0.0.1:7860", "localhost:0", "[::1]:7860"). A non-loopback
// address ("0.0.0.0:7860", "192.0.2.7:7860") would make the API reachable
// from the network: it is accepted only when `tls` (api.tls_cert and
// api.tls_key are set), and refused otherwise with the reason.
struct ListenAddress {
  std::string host;  // an IP literal
  uint16_t port = 0;
  bool loopback = true;
};
Result<std::optional<ListenAddress>> parse_api_listen(std::string_view text, bool tls = false);

}  // namespace yonder::api
