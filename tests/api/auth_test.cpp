// The API gate (api/auth.h) with a manual clock and a counting random
// source: tokens, login codes, sessions, origins; api.listen parsing; the
// Prometheus text builder.
#include "api/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "api/prometheus.h"
#include "api/request_parse.h"

namespace yonder::api {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

RandomFn counting_random() {
  auto n = std::make_shared<uint8_t>(0);
  return [n](std::span<uint8_t> out) {
    for (auto& b : out) b = ++*n;
  };
}

class Gate : public ::testing::Test {
 protected:
  Gate() : auth_("secret-token", "/home/u/.yonder/api-token", counting_random()) { auth_.set_tcp_port(7860); }

  Request tcp(std::string method, std::string target) {
    Request r;
    r.method = std::move(method);
    size_t q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    r.host = "127.0.0.1:7860";
    r.transport = Transport::kTcp;
    return r;
  }
  // Logs in with a fresh code; the session cookie header ("yonder_session=...").
  std::string login(Clock::time_point now) {
    std::string code = auth_.issue_login_code(now);
    Request r = tcp("GET", "/login?code=" + code);
    auto res = auth_.admit(r, now);
    EXPECT_TRUE(res);
    EXPECT_EQ(res->status, 303);
    std::string cookie;
    for (const auto& [k, v] : res->headers) {
      if (k == "Set-Cookie") cookie = v.substr(0, v.find(';'));
    }
    return cookie;
  }

  ApiAuth auth_;
  Clock::time_point t0_{};
};

TEST_F(Gate, BearerTokenAdmitsOnBothTransports) {
  Request r = tcp("GET", "/v1/status");
  r.authorization = "Bearer secret-token";
  EXPECT_FALSE(auth_.admit(r, t0_));
  EXPECT_EQ(r.auth, AuthKind::kToken);
  Request u;
  u.method = "GET";
  u.path = "/v1/status";
  u.host = "localhost";
  u.authorization = "bearer secret-token";
  EXPECT_FALSE(auth_.admit(u, t0_));
}

TEST_F(Gate, MissingOrWrongTokenIs401AndSaysWhatToDo) {
  Request none = tcp("GET", "/v1/status");
  auto res = auth_.admit(none, t0_);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  auto j = nlohmann::json::parse(res->body);
  EXPECT_EQ(j["error"]["code"], "unauthenticated");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("/home/u/.yonder/api-token"), std::string::npos);
  EXPECT_EQ(res->body.find("secret-token\""), std::string::npos);
  for (std::string bad : {"Bearer secret-tokeN", "Bearer secret-token2", "Bearer ", "Basic c2VjcmV0", "secret-token"}) {
    Request r = tcp("GET", "/v1/status");
    r.authorization = bad;
    auto refused = auth_.admit(r, t0_);
    ASSERT_TRUE(refused) << bad;
    EXPECT_EQ(refused->status, 401) << bad;
  }
}

TEST_F(Gate, ForeignOriginHostOrCrossSiteIs403EvenWithTheToken) {
  Request r = tcp("POST", "/v1/jobs");
  r.authorization = "Bearer secret-token";
  r.origin = "http://evil.example";
  auto res = auth_.admit(r, t0_);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  r.origin = "http://127.0.0.1:7861";
  EXPECT_EQ(auth_.admit(r, t0_)->status, 403);
  r.origin = "http://localhost:7860";
  EXPECT_FALSE(auth_.admit(r, t0_));
  Request rebinding = tcp("GET", "/v1/status");
  rebinding.authorization = "Bearer secret-token";
  rebinding.host = "evil.example:7860";
  EXPECT_EQ(auth_.admit(rebinding, t0_)->status, 403);
  Request cross = tcp("GET", "/v1/status");
  cross.authorization = "Bearer secret-token";
  cross.sec_fetch_site = "cross-site";
  EXPECT_EQ(auth_.admit(cross, t0_)->status, 403);
}

TEST_F(Gate, LoginCodeWorksOnceAndGivesAStrictHttpOnlySession) {
  std::string code = auth_.issue_login_code(t0_);
  Request r = tcp("GET", "/login?code=" + code);
  auto res = auth_.admit(r, t0_);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 303);
  std::string set_cookie, location;
  for (const auto& [k, v] : res->headers) {
    if (k == "Set-Cookie") set_cookie = v;
    if (k == "Location") location = v;
  }
  EXPECT_EQ(location, "/");
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(set_cookie.find("Path=/"), std::string::npos);
  Request again = tcp("GET", "/login?code=" + code);
  EXPECT_EQ(auth_.admit(again, t0_)->status, 401);

  Request page = tcp("GET", "/");
  page.cookie = "other=1; " + set_cookie.substr(0, set_cookie.find(';'));
  EXPECT_FALSE(auth_.admit(page, t0_));
  EXPECT_EQ(page.auth, AuthKind::kSession);
}

TEST_F(Gate, ExpiredCodeIsRefused) {
  std::string code = auth_.issue_login_code(t0_);
  Request r = tcp("GET", "/login?code=" + code);
  auto res = auth_.admit(r, t0_ + seconds(60));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_NE(res->body.find("expired"), std::string::npos);
  Request unknown = tcp("GET", "/login?code=nope");
  EXPECT_EQ(auth_.admit(unknown, t0_)->status, 401);
}

TEST_F(Gate, SessionChangesNeedOurOrigin) {
  std::string cookie = login(t0_);
  Request post = tcp("POST", "/v1/jobs/stop");
  post.cookie = cookie;
  EXPECT_EQ(auth_.admit(post, t0_)->status, 403);
  post.origin = "http://127.0.0.1:7860";
  EXPECT_FALSE(auth_.admit(post, t0_));
  Request bogus = tcp("GET", "/");
  bogus.cookie = "yonder_session=forged";
  EXPECT_EQ(auth_.admit(bogus, t0_)->status, 401);
  // Sessions do not reach the unix socket (no browser there).
  Request unix_req;
  unix_req.method = "GET";
  unix_req.path = "/";
  unix_req.cookie = cookie;
  EXPECT_EQ(auth_.admit(unix_req, t0_)->status, 401);
}

TEST_F(Gate, SessionsExpire) {
  std::string cookie = login(t0_);
  Request r = tcp("GET", "/");
  r.cookie = cookie;
  EXPECT_EQ(auth_.admit(r, t0_ + seconds(12 * 3600))->status, 401);
}

TEST(ApiListen, LoopbackOnly) {
  auto off = parse_api_listen("off");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->has_value());
  auto v4 = parse_api_listen("127.0.0.1:0");
  ASSERT_TRUE(v4 && v4->has_value());
  EXPECT_EQ((*v4)->port, 0);
  auto local = parse_api_listen("localhost:7860");
  ASSERT_TRUE(local && local->has_value());
  EXPECT_EQ((*local)->host, "127.0.0.1");
  EXPECT_TRUE(parse_api_listen("[::1]:7860"));
  for (const char* bad :
       {"0.0.0.0:7860", "192.168.1.5:7860", "[::]:7860", "example.com:80", "127.0.0.1", "127.0.0.1:99999"}) {
    EXPECT_FALSE(parse_api_listen(bad)) << bad;
  }
  auto refused = parse_api_listen("0.0.0.0:7860");
  EXPECT_NE(refused.error().message().find("api.tls_cert and api.tls_key"), std::string::npos);
}

// With TLS configured, any address may be bound; the result says whether it is loopback.
TEST(ApiListen, NonLoopbackOnlyWithTls) {
  for (const char* text : {"0.0.0.0:7860", "192.168.1.5:0", "[::]:7860"}) {
    auto a = parse_api_listen(text, true);
    ASSERT_TRUE(a && a->has_value()) << text;
    EXPECT_FALSE((*a)->loopback) << text;
  }
  auto local = parse_api_listen("127.0.0.1:0", true);
  ASSERT_TRUE(local && local->has_value());
  EXPECT_TRUE((*local)->loopback);
  EXPECT_FALSE(parse_api_listen("example.com:80", true));
}

// Over TLS the allowed origins are https:// with the listener's names.
TEST(ApiListen, TlsOriginsAndHosts) {
  ApiAuth auth("secret-token", "/t", counting_random());
  auth.set_tcp_listener(8443, true, {"10.1.2.3", "gpu.example.org"});
  EXPECT_EQ(auth.base_url(), "https://10.1.2.3:8443");
  auto req = [](std::string host, std::string origin) {
    Request r;
    r.method = "GET";
    r.path = "/v1/status";
    r.host = std::move(host);
    r.origin = std::move(origin);
    r.authorization = "Bearer secret-token";
    r.transport = Transport::kTcp;
    return r;
  };
  Clock::time_point now{};
  for (auto [host, origin] : {std::pair{"10.1.2.3:8443", "https://10.1.2.3:8443"},
                              std::pair{"gpu.example.org:8443", "https://gpu.example.org:8443"},
                              std::pair{"gpu.example.org:8443", ""}}) {
    Request r = req(host, origin);
    EXPECT_FALSE(auth.admit(r, now)) << host << " " << origin;
  }
  for (auto [host, origin] : {std::pair{"10.1.2.3:8443", "http://10.1.2.3:8443"},
                              std::pair{"127.0.0.1:8443", ""},
                              std::pair{"evil.example:8443", ""},
                              std::pair{"10.1.2.3:8443", "https://evil.example:8443"}}) {
    Request r = req(host, origin);
    auto refused = auth.admit(r, now);
    ASSERT_TRUE(refused) << host << " " << origin;
    EXPECT_EQ(refused->status, 403);
  }
  // On 443 browsers leave the port out.
  auth.set_tcp_listener(443, true, {"gpu.example.org"});
  Request r = req("gpu.example.org", "https://gpu.example.org");
  EXPECT_FALSE(auth.admit(r, now));
}

TEST(RequestParse, CookiesAndBearer) {
  EXPECT_EQ(cookie_value("a=1; yonder_session=xyz; b=2", "yonder_session").value_or(""), "xyz");
  EXPECT_FALSE(cookie_value("a=1", "yonder_session"));
  EXPECT_EQ(bearer_token("Bearer abc").value_or(""), "abc");
  EXPECT_FALSE(bearer_token("Bearer"));
  EXPECT_FALSE(bearer_token("Token abc"));
}

TEST(Token, Base64UrlOf32BytesAndConstantTimeEqual) {
  std::string t = random_base64url(counting_random(), 32);
  EXPECT_EQ(t.size(), 43u);
  EXPECT_EQ(t.find_first_of("+/="), std::string::npos);
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

TEST(Token, FileIsMadeOnce0600AndReadBack) {
  char tmpl[] = "/tmp/yonder-token-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string path = dir + "/api-token";
  auto made = ensure_api_token(path, system_random);
  ASSERT_TRUE(made) << made.error().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(made->size(), 43u);
  auto again = ensure_api_token(path, system_random);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *made);
  auto read = read_api_token(path);
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, *made);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
  EXPECT_FALSE(read_api_token(path));
}

// Durations land in the first bucket whose bound is not below them; the
// text has cumulative buckets, +Inf equal to the count, and the sum.
TEST(Prometheus, LatencyHistogramSeries) {
  LatencyHistogram h;
  using std::chrono::milliseconds;
  h.observe(milliseconds(3));            // <= 0.005
  h.observe(milliseconds(5));            // <= 0.005 (bounds are inclusive)
  h.observe(milliseconds(700));          // <= 1
  h.observe(std::chrono::seconds(400));  // +Inf only
  auto snap = h.snapshot();
  EXPECT_EQ(snap.count, 4u);
  EXPECT_EQ(snap.cumulative[0], 2u);
  EXPECT_EQ(snap.cumulative[6], 2u);  // <= 0.5
  EXPECT_EQ(snap.cumulative[7], 3u);  // <= 1
  EXPECT_EQ(snap.cumulative.back(), 3u);
  EXPECT_NEAR(snap.sum_seconds, 400.708, 1e-6);
  MetricsText m;
  m.family("x_seconds", "histogram", "X.");
  m.histogram("x_seconds", {{"backend", "docker"}}, snap);
  const std::string& t = m.text();
  EXPECT_NE(t.find("# TYPE x_seconds histogram\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{backend=\"docker\",le=\"0.005\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{backend=\"docker\",le=\"1\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{backend=\"docker\",le=\"300\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{backend=\"docker\",le=\"+Inf\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_sum{backend=\"docker\"} 400.708\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_count{backend=\"docker\"} 4\n"), std::string::npos) << t;
}

TEST(Prometheus, EscapesLabelsAndWritesFamilies) {
  MetricsText m;
  m.family("yonder_jobs", "gauge", "Jobs.");
  m.sample("yonder_jobs", {{"state", "run\"ning\\\n"}}, 3);
  m.sample("yonder_rtt_seconds", {}, 0.0125);
  EXPECT_EQ(m.text(),
            "# HELP yonder_jobs Jobs.\n# TYPE yonder_jobs gauge\n"
            "yonder_jobs{state=\"run\\\"ning\\\\\\n\"} 3\nyonder_rtt_seconds 0.0125\n");
}

}  // namespace
}  // namespace yonder::api
