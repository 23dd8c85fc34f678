// The local API's access rules against a real yonderd (issue 8): every
// route it registers refuses requests without the token, on the unix socket
// and on loopback TCP; a wrong token is 401; a foreign Origin is 403; the
// one-time login URL works once and not after it expires; a non-loopback
// api.listen without TLS stops yonderd at start with the reason (with TLS:
// api_tls_test.cpp). The running daemon's
// routes are also checked against docs/openapi.yaml.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "os/unix_http.h"
#include "support/api_token.h"
#include "support/job_node.h"
#include "support/loopback_client.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

struct Reply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

Reply parse_reply(const std::string& raw) {
  Reply r;
  size_t end = raw.find("\r\n\r\n");
  r.head = raw.substr(0, end);
  if (end != std::string::npos) r.body = raw.substr(end + 4);
  if (raw.size() > 12) r.status = std::atoi(raw.substr(9, 3).c_str());
  return r;
}

std::string header(const Reply& r, const std::string& name) {
  size_t at = r.head.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  at += name.size() + 4;
  return r.head.substr(at, r.head.find("\r\n", at) - at);
}

// The operations docs/openapi.yaml documents (as in tests/api).
std::set<std::pair<std::string, std::string>> documented() {
  std::set<std::pair<std::string, std::string>> out;
  std::ifstream in(std::string(std::getenv("YONDER_SOURCE_DIR")) + "/docs/openapi.yaml");
  std::string line, path;
  bool in_paths = false;
  while (std::getline(in, line)) {
    if (line == "paths:") in_paths = true;
    if (!in_paths || line.empty() || line[0] == '#' || line == "paths:") continue;
    if (line.rfind("  /", 0) == 0 && line.back() == ':') path = line.substr(2, line.size() - 3);
    if (line.rfind("    ", 0) == 0 && line[4] != ' ' && line.back() == ':') {
      std::string m = line.substr(4, line.size() - 5);
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out.insert({m, path});
    }
  }
  return out;
}

class ApiSecurity : public ::testing::Test {
 protected:
  ApiSecurity() : node_(dir_, "alice", false) {
    token_ = api_token(node_.home());
    port_ = node_.yonder_json({"status"}).value("api_port", 0);
  }

  Reply tcp(const std::string& method, const std::string& target, const std::string& extra_headers = "",
            const std::string& body = "") const {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                      "\r\nConnection: close\r\n" + extra_headers;
    if (method == "POST" || !body.empty())
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    auto raw = round_trip(port_, req);
    EXPECT_TRUE(raw) << "no answer on 127.0.0.1:" << port_;
    return parse_reply(raw.value_or(""));
  }
  os::HttpResponse unix_call(const std::string& method, const std::string& target, const std::string& token) const {
    os::HttpRequestOptions o;
    o.bearer_token = token;
    auto r = os::unix_http_request(node_.home() + "/yonderd.sock", method, target, method == "POST" ? "{}" : "", o);
    EXPECT_TRUE(r) << (r ? "" : r.error().to_string());
    return r ? *r : os::HttpResponse{};
  }
  std::string bearer() const { return "Authorization: Bearer " + token_ + "\r\n"; }

  TempDir dir_;
  Node node_;
  std::string token_;
  int port_ = 0;
};

TEST_F(ApiSecurity, TokenFileIsPrivateAndStatusNamesTheTcpPort) {
  struct stat st {};
  ASSERT_EQ(::stat((node_.home() + "/api-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(token_.size(), 43u);  // 32 bytes, base64url
  EXPECT_GT(port_, 0);
  std::ifstream url(node_.home() + "/api-url");
  std::string line;
  std::getline(url, line);
  EXPECT_EQ(line, "http://127.0.0.1:" + std::to_string(port_));
  EXPECT_EQ(node_.daemon().log().find(token_), std::string::npos) << "the token must never be logged";
}

TEST_F(ApiSecurity, EveryRouteRefusesRequestsWithoutTheRightToken) {
  auto listed = unix_call("GET", "/v1/routes", token_);
  ASSERT_EQ(listed.status, 200) << listed.body;
  auto routes = json::parse(listed.body)["routes"];
  ASSERT_GT(routes.size(), 30u);
  auto docs = documented();
  for (const auto& r : routes) {
    std::string method = r["method"], path = r["path"];
    SCOPED_TRACE(method + " " + path);
    EXPECT_TRUE(docs.count({method, path})) << "not in docs/openapi.yaml";
    auto none = unix_call(method, path, "");
    EXPECT_EQ(none.status, 401) << none.body;
    auto wrong = unix_call(method, path, token_.substr(1) + "x");
    EXPECT_EQ(wrong.status, 401) << wrong.body;
    auto tcp_none = tcp(method, path, "", method == "POST" ? "{}" : "");
    EXPECT_EQ(tcp_none.status, 401) << tcp_none.body;
    auto tcp_wrong = tcp(method, path, "Authorization: Bearer not-the-token\r\n", method == "POST" ? "{}" : "");
    EXPECT_EQ(tcp_wrong.status, 401) << tcp_wrong.body;
  }
  // The refusal says what to do.
  auto j = json::parse(tcp("GET", "/v1/status").body, nullptr, false);
  EXPECT_EQ(j["error"]["code"], "unauthenticated");
  EXPECT_NE(j["error"]["message"].get<std::string>().find(node_.home() + "/api-token"), std::string::npos);
  // And the right token works on both listeners.
  EXPECT_EQ(tcp("GET", "/v1/status", bearer()).status, 200);
  EXPECT_EQ(unix_call("GET", "/v1/status", token_).status, 200);
  auto metrics = tcp("GET", "/metrics", bearer());
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE yonder_peers gauge"), std::string::npos) << metrics.body;
}

// The series /metrics adds for GPUs (the node's fake inventory: 2 devices,
// idle) and link traffic (families present; no peer here, so no samples).
TEST_F(ApiSecurity, MetricsExportGpusPerDeviceAndLinkBytes) {
  auto metrics = tcp("GET", "/metrics", bearer());
  ASSERT_EQ(metrics.status, 200);
  const std::string& m = metrics.body;
  for (const char* family : {"yonder_gpu_utilization_ratio", "yonder_gpu_memory_used_bytes",
                             "yonder_gpu_memory_total_bytes", "yonder_link_received_bytes", "yonder_link_sent_bytes"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + family + " gauge"), std::string::npos) << family << "\n" << m;
  }
  // One sample per device, with a sane value.
  for (const char* gpu : {"0", "1"}) {
    std::string prefix = std::string("yonder_gpu_memory_total_bytes{gpu=\"") + gpu + "\"";
    size_t at = m.find(prefix);
    ASSERT_NE(at, std::string::npos) << prefix << "\n" << m;
    size_t value = m.find("} ", at);
    ASSERT_NE(value, std::string::npos);
    EXPECT_GT(std::stod(m.substr(value + 2, m.find('\n', value) - value - 2)), 1e9) << m;
    std::string util = std::string("yonder_gpu_utilization_ratio{gpu=\"") + gpu + "\"";
    at = m.find(util);
    ASSERT_NE(at, std::string::npos) << util << "\n" << m;
    double ratio = std::stod(m.substr(m.find("} ", at) + 2));
    EXPECT_GE(ratio, 0.0);
    EXPECT_LE(ratio, 1.0);
  }
}

// The value of one series in Prometheus text ("name{labels}" exactly as
// rendered), or -1 when there is no such sample.
double series_value(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// Link handshakes are counted (docs/metrics.md): no samples before any
// connection; bytes that are not TLS on the link port are one failure of
// class tls; pairing a peer is one handshake on each side.
TEST_F(ApiSecurity, MetricsCountLinkHandshakes) {
  auto before = tcp("GET", "/metrics", bearer()).body;
  EXPECT_NE(before.find("# TYPE yonder_link_handshakes_total counter"), std::string::npos) << before;
  EXPECT_NE(before.find("# TYPE yonder_link_handshake_failures_total counter"), std::string::npos) << before;
  EXPECT_EQ(before.find("yonder_link_handshakes_total{"), std::string::npos) << before;
  EXPECT_EQ(before.find("yonder_link_handshake_failures_total{"), std::string::npos) << before;

  int link_port = node_.yonder_json({"status"}).value("link_port", 0);
  ASSERT_GT(link_port, 0);
  // The acceptor counts the failure before it closes the connection.
  round_trip(link_port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto garbage = tcp("GET", "/metrics", bearer()).body;
  EXPECT_EQ(series_value(garbage, "yonder_link_handshake_failures_total{path_kind=\"direct\",reason=\"tls\"}"), 1)
      << garbage;
  EXPECT_EQ(garbage.find("yonder_link_handshakes_total{"), std::string::npos) << garbage;

  Node bob(dir_, "bob", false);
  bob.pair_with(node_, {});
  auto paired = tcp("GET", "/metrics", bearer()).body;
  EXPECT_GE(series_value(paired, "yonder_link_handshakes_total{path_kind=\"direct\"}"), 1) << paired;
  os::HttpRequestOptions as_bob;
  as_bob.bearer_token = api_token(bob.home());
  auto bob_metrics = os::unix_http_request(bob.home() + "/yonderd.sock", "GET", "/metrics", "", as_bob);
  ASSERT_TRUE(bob_metrics);
  EXPECT_GE(series_value(bob_metrics->body, "yonder_link_handshakes_total{path_kind=\"direct\"}"), 1)
      << bob_metrics->body;
}

// The live-log WebSocket of the running daemon is behind the same gate: no
// token 401, a foreign Origin 403 (cross-site WebSocket hijacking), and with
// the token the handshake completes.
TEST_F(ApiSecurity, LogWebSocketsPassTheGate) {
  auto upgrade = [this](const std::string& path, const std::string& extra) {
    std::string req = "GET " + path + "?id=nope&offset=0 HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + extra + "\r\n";
    return parse_reply(round_trip(port_, req).value_or(""));
  };
  for (const char* path : {"/v1/jobs/logs/ws", "/v1/provider/jobs/logs/ws"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(upgrade(path, "").status, 401);
    EXPECT_EQ(upgrade(path, bearer() + "Origin: http://evil.example\r\n").status, 403);
    auto ok = upgrade(path, bearer() + "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n");
    EXPECT_EQ(ok.status, 101) << ok.head;
    EXPECT_EQ(header(ok, "Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    // The unknown job's error comes as the one message, then a close frame.
    EXPECT_NE(ok.body.find("error"), std::string::npos);
    EXPECT_EQ(tcp("GET", std::string(path) + "?id=nope", bearer()).status, 426);
  }
}

TEST_F(ApiSecurity, ForeignOriginOrHostIsRefused) {
  auto evil = tcp("GET", "/v1/status", bearer() + "Origin: http://evil.example\r\n");
  EXPECT_EQ(evil.status, 403) << evil.body;
  auto other_port = tcp("POST", "/v1/links/revoke", bearer() + "Origin: http://127.0.0.1:1\r\n", "{}");
  EXPECT_EQ(other_port.status, 403) << other_port.body;
  auto cross = tcp("GET", "/v1/status", bearer() + "Sec-Fetch-Site: cross-site\r\n");
  EXPECT_EQ(cross.status, 403) << cross.body;
  std::string own = "Origin: http://localhost:" + std::to_string(port_) + "\r\n";
  EXPECT_EQ(tcp("GET", "/v1/status", bearer() + own).status, 200);
  // DNS rebinding: the right port under another name.
  std::string req = "GET /v1/status HTTP/1.1\r\nHost: rebound.example:" + std::to_string(port_) +
                    "\r\nConnection: close\r\n" + bearer() + "\r\n";
  EXPECT_EQ(parse_reply(round_trip(port_, req).value_or("")).status, 403);
}

TEST_F(ApiSecurity, OneTimeLoginUrlGivesASessionOnce) {
  auto d = node_.yonder_json({"dashboard"});
  std::string url = d.value("url", "");
  std::string prefix = "http://127.0.0.1:" + std::to_string(port_);
  ASSERT_EQ(url.rfind(prefix + "/login?code=", 0), 0u) << url;
  std::string target = url.substr(prefix.size());

  auto login = tcp("GET", target);
  ASSERT_EQ(login.status, 303) << login.body;
  EXPECT_EQ(header(login, "Location"), "/");
  std::string set_cookie = header(login, "Set-Cookie");
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos) << set_cookie;
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos) << set_cookie;
  std::string cookie = "Cookie: " + set_cookie.substr(0, set_cookie.find(';')) + "\r\n";

  auto page = tcp("GET", "/", cookie);
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(header(page, "Content-Type").find("text/html"), std::string::npos);
  EXPECT_EQ(tcp("GET", "/v1/status", cookie).status, 200);
  // Changes through a session must show our own Origin.
  EXPECT_EQ(tcp("POST", "/v1/links/revoke", cookie, "{}").status, 403);
  std::string own = "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n";
  auto revoke = tcp("POST", "/v1/links/revoke", cookie + own, "{}");
  EXPECT_NE(revoke.status, 401);
  EXPECT_NE(revoke.status, 403);
  // A session cannot mint login links; the page without a session is 401.
  EXPECT_EQ(tcp("POST", "/v1/dashboard/login", cookie + own, "{}").status, 403);
  EXPECT_EQ(tcp("GET", "/").status, 401);

  auto again = tcp("GET", target);
  EXPECT_EQ(again.status, 401) << again.body;
  EXPECT_NE(again.body.find("yonder dashboard"), std::string::npos);
}

TEST(ApiSecurityStart, ExpiredLoginCodeIsRefused) {
  TempDir dir;
  Node node(dir, "bob", false, {{"YONDER_API_LOGIN_CODE_TTL_S", "0"}});
  auto d = node.yonder_json({"dashboard"});
  std::string url = d.value("url", "");
  int port = node.yonder_json({"status"}).value("api_port", 0);
  std::string target = url.substr(url.find("/login"));
  auto raw = round_trip(
      port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n");
  auto r = parse_reply(raw.value_or(""));
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
}

TEST(ApiSecurityStart, NonLoopbackListenIsRefusedAtStart) {
  TempDir dir;
  Env env = {{"YONDER_HOME", dir / "home"},      {"YONDER_CONFIG", ""},     {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
             {"YONDER_GPU_INVENTORY", "fake:1"}, {"YONDER_PASSPHRASE", ""}, {"YONDER_PASSPHRASE_FILE", ""}};
  ASSERT_EQ(run({program_path("yonder"), "init", "--name", "carol"}, env).exit_code, 0);
  for (const char* listen : {"0.0.0.0:0", "192.0.2.1:7860", "[::]:0"}) {
    env["YONDER_API_LISTEN"] = listen;
    Daemon d(env);
    EXPECT_FALSE(d.ready()) << listen;
    EXPECT_EQ(d.wait(), 1) << listen;
    EXPECT_NE(d.log().find("is not a loopback address"), std::string::npos) << d.log();
    EXPECT_NE(d.log().find("Set api.tls_cert and api.tls_key"), std::string::npos) << d.log();
  }
  // "off": the unix socket only, still token-protected; `yonder dashboard`
  // says why it cannot. The home predates API tokens: yonderd makes one.
  ASSERT_EQ(::unlink((dir / "home/api-token").c_str()), 0);
  env["YONDER_API_LISTEN"] = "off";
  Daemon d(env);
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_EQ(api_token(dir / "home").size(), 43u);
  auto st = run({program_path("yonder"), "status", "--json"}, env);
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_EQ(json::parse(st.out, nullptr, false).value("api_port", -1), 0);
  auto dash = run({program_path("yonder"), "dashboard"}, env);
  EXPECT_NE(dash.exit_code, 0);
  EXPECT_NE(dash.err.find("api.listen"), std::string::npos) << dash.err;
}

// Two nodes on one host, both with api.listen at its default: the second
// finds 127.0.0.1:7860 taken and listens on a free port instead, says so,
// and writes it to api-url (what the dashboard and the Python client read),
// so neither sends its token to the other's port. A port the operator set
// that is taken stops yonderd with the reason.
TEST(ApiSecurityStart, TheDefaultPortTakenMovesToAFreePortWrittenToApiUrl) {
  // Whoever holds 7860 (this test, or something else on the machine) holds it
  // for the whole test.
  int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(7860);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool held_here = ::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(holder, 1) == 0;
  TempDir dir;
  Env env = {{"YONDER_HOME", dir / "home"},      {"YONDER_CONFIG", ""},     {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
             {"YONDER_GPU_INVENTORY", "fake:1"}, {"YONDER_PASSPHRASE", ""}, {"YONDER_PASSPHRASE_FILE", ""},
             {"YONDER_API_LISTEN", ""}};  // the default, as a second node on a desktop has it
  ASSERT_EQ(run({program_path("yonder"), "init", "--name", "dave"}, env).exit_code, 0);
  {
    Daemon d(env);
    ASSERT_TRUE(d.ready()) << d.log();
    EXPECT_NE(d.log().find("127.0.0.1:7860 is taken"), std::string::npos) << d.log();
    std::ifstream file(dir / "home/api-url");
    std::string url;
    std::getline(file, url);
    ASSERT_EQ(url.rfind("http://127.0.0.1:", 0), 0u) << url;
    EXPECT_NE(url, "http://127.0.0.1:7860");
    auto st = run({program_path("yonder"), "status", "--json"}, env);
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_EQ(json::parse(st.out, nullptr, false).value("api_url", ""), url);
    auto dash = run({program_path("yonder"), "dashboard"}, env);
    EXPECT_EQ(dash.exit_code, 0) << dash.err;
    EXPECT_NE(dash.out.find(url + "/login?code="), std::string::npos) << dash.out;
  }
  env["YONDER_API_LISTEN"] = "127.0.0.1:7860";  // chosen: taken is an error
  Daemon chosen(env);
  EXPECT_FALSE(chosen.ready());
  EXPECT_EQ(chosen.wait(), 1) << chosen.log();
  EXPECT_NE(chosen.log().find("another program (or another yonderd) has that port"), std::string::npos)
      << chosen.log();
  if (held_here) ::close(holder);
}

}  // namespace
}  // namespace yonder::testing
