// The local API's cost per request (what `yonder status` pays) against the
// anchor: the same request and reply bytes over a raw unix socket to a
// minimal blocking echo server, i.e. the floor for one round trip.
//
// Then the same request over loopback TCP with the token on a keep-alive
// connection (what a browser, a script or Prometheus pays), as p50/p99.
//
// Measured A B A B over --pairs pairs (default 7), each a fixed number of
// round trips, reporting the ratio per pair and the median, because this
// machine's speed drifts by tens of percent over minutes.
#include <utility>  // before Boost.Asio (GCC 12)

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/server.h"
#include "bench_http.h"
#include "os/unix_http.h"

namespace {

using Clock = std::chrono::steady_clock;

const std::string kReplyBody = R"({"node_id":"ABCDEFG-HJKMNPQ-RSTVWXY-Z012345-6789ABC-DEFGHJK-MNPQRST-VWXYZ01","name":"bench","peers":0})";

// Anchor: accepts one connection per request, reads a request, writes a
// fixed HTTP reply of the same size as the API's, closes.
void raw_server(int listen_fd, const std::string& reply) {
  for (;;) {
    int c = ::accept(listen_fd, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    std::string got;
    while (got.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    [[maybe_unused]] auto w = ::write(c, reply.data(), reply.size());
    ::close(c);
  }
}

const std::string kToken = "bench-token";

double time_requests(const std::string& socket, int n) {
  yonder::os::HttpRequestOptions opts;
  opts.bearer_token = kToken;  // the API checks it (the raw anchor ignores it)
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = yonder::os::unix_http_request(socket, "GET", "/v1/status", {}, opts);
    if (!r || r->status != 200) {
      std::fprintf(stderr, "request failed\n");
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 7;
  int requests = 2000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
    if (a.rfind("--benchmark_min_time=", 0) == 0) requests = 200;  // the quick ctest run
  }
  char dir_tmpl[] = "/tmp/yb-XXXXXX";
  std::string dir = ::mkdtemp(dir_tmpl);
  std::string api_sock = dir + "/api.sock";
  std::string raw_sock = dir + "/raw.sock";

  boost::asio::io_context io;
  yonder::api::Router router;
  router.add("GET", "/v1/status", [](const yonder::api::Request&, yonder::api::Reply reply) {
    reply(yonder::api::Response(200, kReplyBody));
  });
  yonder::api::ApiAuth auth(kToken, "bench", yonder::api::system_random);
  yonder::api::LocalApiServer server(io, api_sock, std::move(router), auth);
  if (!server.start()) return 1;
  std::thread io_thread([&] { io.run(); });

  int lfd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, raw_sock.c_str());
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 128) != 0) return 1;
  std::string raw_reply = "HTTP/1.1 200 OK\r\nServer: yonderd\r\nContent-Type: application/json\r\n"
                          "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: " +
                          std::to_string(kReplyBody.size()) + "\r\n\r\n" + kReplyBody;
  std::thread raw_thread(raw_server, lfd, raw_reply);

  std::vector<double> ratios;
  std::printf("%-6s %14s %14s %8s\n", "pair", "raw us/req", "api us/req", "ratio");
  for (int p = 0; p < pairs; ++p) {
    double raw = time_requests(raw_sock, requests);
    double api = time_requests(api_sock, requests);
    ratios.push_back(api / raw);
    std::printf("%-6d %14.1f %14.1f %8.2f\n", p + 1, raw, api, api / raw);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("median ratio (local API / raw unix socket): %.2f over %d pairs of %d requests\n",
              ratios[ratios.size() / 2], pairs, requests);

  // Loopback TCP, token, keep-alive: per-request latency percentiles.
  auto port = server.listen_tcp("127.0.0.1", 0);
  if (!port) return 1;
  {
    yonder::bench::KeepAliveClient client(*port, kToken);
    std::vector<double> us;
    for (int i = 0; i < requests; ++i) {
      auto start = Clock::now();
      if (client.get("/v1/status") != 200) {
        std::fprintf(stderr, "TCP request failed\n");
        return 1;
      }
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    std::printf("GET /v1/status over TCP (token, keep-alive): p50 %.1f us, p99 %.1f us over %d requests\n",
                yonder::bench::quantile(us, 0.5), yonder::bench::quantile(us, 0.99), requests);
  }

  ::shutdown(lfd, SHUT_RDWR);
  ::close(lfd);
  raw_thread.join();
  io.post([&] { server.stop(); io.stop(); });
  io_thread.join();
  ::unlink(raw_sock.c_str());
  ::rmdir(dir.c_str());
  return 0;
}
