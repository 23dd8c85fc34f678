// The local API over TLS (issue 8, api.tls_cert / api.tls_key) against a
// real yonderd: a non-loopback api.listen starts only with both settings
// and a certificate that loads, and then serves HTTPS only: no token 401,
// the token 200, keep-alive and the log WebSocket work inside TLS, and
// plain HTTP to the port is answered with a 400 that says to use https.
//
// The non-loopback address is 10.231.0.1 on a veth interface inside a
// network namespace of the test's own (ip netns), so the host's network is
// not touched; yonderd runs inside it and the test's client sockets are
// made there. The certificate is made at test time with the openssl CLI.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/api_token.h"
#include "support/job_node.h"
#include "support/loopback_client.h"
#include "support/nat_lab.h"
#include "support/netns_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kAddress = "10.231.0.1";

// A network namespace named after this process with a veth pair whose one
// end holds kAddress; deleted (with everything in it) on destruction.
// Namespaces left by a killed run are removed by the next one.
class TestNetns {
 public:
  static std::optional<std::string> unavailable_reason() { return netns_unavailable_reason(); }
  TestNetns() : name_("yonder-apitls-" + std::to_string(::getpid())) {
    reap();
    ip({"netns", "add", name_});
    ip({"-n", name_, "link", "set", "lo", "up"});
    ip({"-n", name_, "link", "add", "ytls0", "type", "veth", "peer", "name", "ytls1"});
    ip({"-n", name_, "addr", "add", std::string(kAddress) + "/24", "dev", "ytls0"});
    ip({"-n", name_, "link", "set", "ytls0", "up"});
    ip({"-n", name_, "link", "set", "ytls1", "up"});
  }
  ~TestNetns() { run({ip_program(), "netns", "del", name_}); }
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;

  // Runs yonderd inside the namespace (Daemon's argv prefix execs it there).
  DaemonStarter starter() const {
    return [ns = name_](const Env& env) {
      return std::make_unique<Daemon>(env, std::vector<std::string>{},
                                      std::vector<std::string>{ip_program(), "netns", "exec", ns});
    };
  }
  // A TCP connection from inside the namespace to ADDRESS:port, or -1.
  int connect_to(const std::string& address, int port) const {
    int fd = -1;
    std::thread t([&] {
      int ns = ::open(("/var/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0) return;
      bool in = ::setns(ns, CLONE_NEWNET) == 0;
      ::close(ns);
      if (in) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    });
    t.join();
    if (fd < 0) return -1;
    timeval tv{20, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

 private:
  static void ip(std::vector<std::string> args) {
    args.insert(args.begin(), ip_program());
    auto r = run(args);
    if (r.exit_code != 0) throw std::runtime_error("ip " + args[1] + " " + args[2] + ": " + r.err);
  }
  // Namespaces of earlier runs whose process is gone.
  static void reap() {
    std::istringstream list(run({ip_program(), "netns", "list"}).out);
    std::string line;
    while (std::getline(list, line)) {
      std::string ns = line.substr(0, line.find(' '));
      if (ns.rfind("yonder-apitls-", 0) != 0) continue;
      int pid = std::atoi(ns.c_str() + std::strlen("yonder-apitls-"));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) run({ip_program(), "netns", "del", ns});
    }
  }
  std::string name_;
};

// A self-signed certificate for kAddress (and gpu.test, 127.0.0.1), made now.
struct TestCertificate {
  explicit TestCertificate(const TempDir& dir, const std::string& name = "api")
      : cert(dir / (name + "-cert.pem")), key(dir / (name + "-key.pem")) {
    auto r =
        run({"/usr/bin/env", "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=yonder api test", "-addext",
             std::string("subjectAltName=IP:") + kAddress + ",DNS:gpu.test,IP:127.0.0.1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  std::string cert, key;
};

struct Reply {
  int status = 0;
  std::string head;
  std::string body;
};

// Splits a stream of HTTP/1.1 replies (each with Content-Length).
std::vector<Reply> parse_replies(std::string raw) {
  std::vector<Reply> out;
  while (raw.size() > 12 && raw.rfind("HTTP/1.1 ", 0) == 0) {
    size_t end = raw.find("\r\n\r\n");
    if (end == std::string::npos) break;
    Reply r;
    r.head = raw.substr(0, end);
    r.status = std::atoi(raw.substr(9, 3).c_str());
    size_t cl = r.head.find("Content-Length: ");
    size_t len = cl == std::string::npos ? raw.size() - end - 4 : std::stoul(r.head.substr(cl + 16));
    r.body = raw.substr(end + 4, len);
    raw.erase(0, std::min(raw.size(), end + 4 + len));
    out.push_back(r);
  }
  return out;
}

struct TlsResult {
  bool handshake = false;
  std::string version;  // "TLSv1.3"
  std::string error;    // why the handshake failed
  std::string raw;      // everything read after sending the request
};

// Connects over TLS on `fd` (owned), verifying the server's certificate
// against `ca` and its name against `expect_ip`; sends `request` and reads
// until the server closes.
TlsResult tls_round_trip(int fd, const std::string& ca, const std::string& expect_ip, const std::string& request,
                         int max_version = 0) {
  TlsResult out;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  if (max_version != 0) SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL* ssl = SSL_new(ctx);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), expect_ip.c_str());
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) == 1) {
    out.handshake = true;
    out.version = SSL_get_version(ssl);
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[16384];
    for (;;) {
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) break;
      out.raw.append(buf, static_cast<size_t>(n));
    }
  } else {
    unsigned long e = ERR_get_error();
    out.error = e != 0 ? ERR_error_string(e, nullptr) : "handshake failed";
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) out.error += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  }
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return out;
}

std::string plain_round_trip(int fd, const std::string& request) {
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Env tls_env(const TestCertificate& c, const std::string& listen) {
  return {{"YONDER_API_LISTEN", listen}, {"YONDER_API_TLS_CERT", c.cert}, {"YONDER_API_TLS_KEY", c.key}};
}

TEST(ApiTls, NonLoopbackBindServesHttpsOnly) {
  YONDER_REQUIRE_NETNS_OR_SKIP(TestNetns::unavailable_reason());
  TempDir dir;
  TestNetns netns;
  TestCertificate cert(dir);
  Node node(dir, "tls", false, tls_env(cert, std::string(kAddress) + ":0"), "", netns.starter());
  ASSERT_TRUE(node.daemon().ready()) << node.daemon().log();
  std::string token = api_token(node.home());
  auto status = node.yonder_json({"status"});
  int port = status.value("api_port", 0);
  ASSERT_GT(port, 0);
  std::string base = "https://" + std::string(kAddress) + ":" + std::to_string(port);
  EXPECT_EQ(status.value("api_url", ""), base);
  std::ifstream url_file(node.home() + "/api-url");
  std::string line;
  std::getline(url_file, line);
  EXPECT_EQ(line, base);

  std::string host = "Host: " + std::string(kAddress) + ":" + std::to_string(port) + "\r\n";
  std::string bearer = "Authorization: Bearer " + token + "\r\n";
  auto https = [&](const std::string& request, int max_version = 0) {
    int fd = netns.connect_to(kAddress, port);
    EXPECT_GE(fd, 0) << "cannot connect to " << base;
    return tls_round_trip(fd, cert.cert, kAddress, request, max_version);
  };

  // No token: 401, over TLS 1.3.
  auto none = https("GET /v1/status HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n");
  ASSERT_TRUE(none.handshake) << none.error;
  EXPECT_EQ(none.version, "TLSv1.3");
  auto none_replies = parse_replies(none.raw);
  ASSERT_EQ(none_replies.size(), 1u) << none.raw;
  EXPECT_EQ(none_replies[0].status, 401);

  // The token, twice on one kept-alive connection, and on TLS 1.2 too.
  auto ok = https("GET /v1/status HTTP/1.1\r\n" + host + bearer + "\r\nGET /metrics HTTP/1.1\r\n" + host + bearer +
                  "Connection: close\r\n\r\n");
  ASSERT_TRUE(ok.handshake) << ok.error;
  auto replies = parse_replies(ok.raw);
  ASSERT_EQ(replies.size(), 2u) << ok.raw;
  EXPECT_EQ(replies[0].status, 200);
  EXPECT_EQ(json::parse(replies[0].body, nullptr, false).value("api_url", ""), base);
  EXPECT_EQ(replies[1].status, 200);
  EXPECT_NE(replies[1].body.find("# TYPE yonder_peers gauge"), std::string::npos);
  auto tls12 = https("GET /v1/status HTTP/1.1\r\n" + host + bearer + "Connection: close\r\n\r\n", TLS1_2_VERSION);
  ASSERT_TRUE(tls12.handshake) << tls12.error;
  EXPECT_EQ(tls12.version, "TLSv1.2");
  EXPECT_EQ(parse_replies(tls12.raw).at(0).status, 200);

  // Origins are https:// with the listener's names; http:// or others are refused.
  std::string own = "Origin: " + base + "\r\n";
  auto with_origin = https("GET /v1/status HTTP/1.1\r\n" + host + bearer + own + "Connection: close\r\n\r\n");
  EXPECT_EQ(parse_replies(with_origin.raw).at(0).status, 200) << with_origin.raw;
  std::string plain_origin = "Origin: http://" + std::string(kAddress) + ":" + std::to_string(port) + "\r\n";
  auto wrong_scheme = https("GET /v1/status HTTP/1.1\r\n" + host + bearer + plain_origin + "Connection: close\r\n\r\n");
  EXPECT_EQ(parse_replies(wrong_scheme.raw).at(0).status, 403) << wrong_scheme.raw;
  auto named = https("GET /v1/status HTTP/1.1\r\nHost: gpu.test:" + std::to_string(port) + "\r\n" + bearer +
                     "Origin: https://gpu.test:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(parse_replies(named.raw).at(0).status, 200) << named.raw;
  auto rebound = https("GET /v1/status HTTP/1.1\r\nHost: evil.example:" + std::to_string(port) + "\r\n" + bearer +
                       "Connection: close\r\n\r\n");
  EXPECT_EQ(parse_replies(rebound.raw).at(0).status, 403) << rebound.raw;

  // The log WebSocket upgrades inside TLS (wss://), behind the same gate.
  std::string upgrade = "GET /v1/jobs/logs/ws?id=nope&offset=0 HTTP/1.1\r\n" + host +
                        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  auto ws_none = https(upgrade + "\r\n");
  EXPECT_EQ(parse_replies(ws_none.raw).at(0).status, 401) << ws_none.raw;
  auto ws = https(upgrade + bearer + own + "\r\n");
  ASSERT_TRUE(ws.handshake) << ws.error;
  EXPECT_EQ(ws.raw.rfind("HTTP/1.1 101 ", 0), 0u) << ws.raw;
  EXPECT_NE(ws.raw.find("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos);
  EXPECT_NE(ws.raw.find("error"), std::string::npos) << "the unknown job's error comes as a message";

  // Plain HTTP to the TLS port: a 400 that says to use https, then the end.
  int fd = netns.connect_to(kAddress, port);
  ASSERT_GE(fd, 0);
  auto plain = parse_replies(plain_round_trip(fd, "GET /v1/status HTTP/1.1\r\n" + host + bearer + "\r\n"));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].status, 400);
  EXPECT_NE(plain[0].body.find("HTTPS only; use " + base), std::string::npos) << plain[0].body;
  EXPECT_EQ(plain[0].body.find("\"node_id\""), std::string::npos);

  // A client that does not trust the certificate does not get through.
  int fd2 = netns.connect_to(kAddress, port);
  ASSERT_GE(fd2, 0);
  auto untrusted = tls_round_trip(fd2, dir / "no-such-ca.pem", kAddress, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(untrusted.handshake);
  EXPECT_EQ(node.daemon().log().find(token), std::string::npos) << "the token must never be logged";
}

// Loopback may use TLS too: the URL is https://127.0.0.1:PORT.
TEST(ApiTls, LoopbackBindMayUseTls) {
  TempDir dir;
  TestCertificate cert(dir);
  Node node(dir, "local", false, tls_env(cert, "127.0.0.1:0"));
  ASSERT_TRUE(node.daemon().ready()) << node.daemon().log();
  auto status = node.yonder_json({"status"});
  int port = status.value("api_port", 0);
  EXPECT_EQ(status.value("api_url", ""), "https://127.0.0.1:" + std::to_string(port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  auto r = tls_round_trip(fd, cert.cert, "127.0.0.1",
                          "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nAuthorization: Bearer " + api_token(node.home()) + "\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(r.handshake) << r.error;
  EXPECT_EQ(parse_replies(r.raw).at(0).status, 200) << r.raw;
  // clients/python follows the https:// URL in api-url, trusting the test's certificate.
  auto py = run(
      {"/usr/bin/env", "python3", "-c",
       "from yonder_client import YonderClient; print(YonderClient(cafile='" + cert.cert + "').status()['api_url'])"},
      {{"PYTHONPATH", std::string(std::getenv("YONDER_SOURCE_DIR")) + "/clients/python"},
       {"YONDER_HOME", node.home()},
       {"YONDER_API_URL", ""},
       {"YONDER_API_CAFILE", ""}});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out, "https://127.0.0.1:" + std::to_string(port) + "\n");
  // `yonder dashboard` hands out an https login URL.
  auto d = node.yonder_json({"dashboard"});
  EXPECT_EQ(d.value("url", "").rfind("https://127.0.0.1:" + std::to_string(port) + "/login?code=", 0), 0u) << d;
}

// Settings that cannot work stop yonderd at start, naming the setting.
TEST(ApiTls, BadTlsSettingsAreRefusedAtStart) {
  TempDir dir;
  TestCertificate cert(dir);
  TestCertificate other(dir, "other");  // a second key pair
  Env env = {{"YONDER_HOME", dir / "home"},      {"YONDER_CONFIG", ""},     {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
             {"YONDER_GPU_INVENTORY", "fake:1"}, {"YONDER_PASSPHRASE", ""}, {"YONDER_PASSPHRASE_FILE", ""},
             {"YONDER_API_LISTEN", "0.0.0.0:0"}};
  ASSERT_EQ(run({program_path("yonder"), "init", "--name", "dave"}, env).exit_code, 0);
  struct Case {
    std::string cert, key, expect;
  };
  for (const Case& c :
       {Case{cert.cert, "", "api.tls_key"}, Case{"", cert.key, "api.tls_cert"},
        Case{dir / "missing.pem", cert.key, "api.tls_cert: cannot use " + (dir / "missing.pem")},
        Case{cert.cert, cert.cert, "api.tls_key"}, Case{cert.cert, other.key, "does not belong to the certificate"}}) {
    env["YONDER_API_TLS_CERT"] = c.cert;
    env["YONDER_API_TLS_KEY"] = c.key;
    Daemon d(env);
    EXPECT_FALSE(d.ready()) << c.cert << " " << c.key;
    EXPECT_EQ(d.wait(), 1);
    EXPECT_NE(d.log().find(c.expect), std::string::npos) << d.log();
  }
}

}  // namespace
}  // namespace yonder::testing
