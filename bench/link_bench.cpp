// The peer link's cost against raw TCP on loopback, in one run:
//   throughput: N bytes through one link stream, and through 16 streams,
//               versus the same bytes through a plain TCP socket;
//   handshake:  a new session (TCP + TLS 1.3 with pinned keys + hello) and
//               one request on it, versus a TCP connect and one round trip.
// Runs A B A B over --pairs pairs (default 7) and prints each ratio and the
// median, since this machine drifts by tens of percent over minutes.
// Usage: link_bench [--bytes=1G] [--pairs=7] [--handshakes=50]
#include <utility>  // before Boost.Asio (GCC 12)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench_tcp.h"
#include "crypto/identity.h"
#include "crypto/scope.h"
#include "net/link/link_service.h"

namespace {

using namespace yonder;
using Clock = std::chrono::steady_clock;

// Both nodes pin each other: the bench measures the link, not the trust store.
class PinBoth final : public link::TrustPolicy {
 public:
  explicit PinBoth(PublicKeyBytes other) : other_(other) {}
  link::KeyVerdict classify(const PublicKeyBytes& k) override {
    return k == other_ ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  }
  Result<nlohmann::json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&, const std::string&,
                                const std::string&) override {
    return make_error(ErrorCode::kNotFound, "no links in the bench");
  }
  Status authorize(const PublicKeyBytes&, const std::string&) override { return ok_status(); }
  void seen(const PublicKeyBytes&) override {}

 private:
  PublicKeyBytes other_;
};

struct Node {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  Identity id = Identity::generate().value();
  std::unique_ptr<PinBoth> policy;
  std::unique_ptr<link::LinkService> service;
  std::thread thread;
  void start(PublicKeyBytes other, const char* name) {
    policy = std::make_unique<PinBoth>(other);
    service = std::make_unique<link::LinkService>(io, id, *policy, link::LinkConfig{name});
    service->add_method("node.info", [](const PublicKeyBytes&, const nlohmann::json&, link::RpcReply r) {
      r(nlohmann::json{{"ok", true}});
    });
    thread = std::thread([this] { io.run(); });
  }
  template <typename F>
  auto on_loop(F f) {
    std::promise<decltype(f())> p;
    boost::asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
  void stop() {
    boost::asio::post(io, [this] {
      service->stop();
      work.reset();
    });
    thread.join();
  }
};

// Raw TCP anchor: a receiver thread counts bytes until EOF.
double raw_tcp_seconds(uint64_t bytes) { return bench::raw_tcp_seconds(bytes, 64 * 1024); }

// Raw TCP anchor for handshakes: connect, 1-byte round trip, close.
double raw_connect_ms(int count) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(lfd, 64);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread srv([lfd, count] {
    for (int i = 0; i < count; ++i) {
      int c = ::accept(lfd, nullptr, nullptr);
      char b;
      if (::read(c, &b, 1) == 1) [[maybe_unused]] auto w = ::write(c, &b, 1);
      ::close(c);
    }
  });
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    char b = 1;
    [[maybe_unused]] auto w = ::write(fd, &b, 1);
    [[maybe_unused]] auto r = ::read(fd, &b, 1);
    ::close(fd);
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count() / count;
  srv.join();
  ::close(lfd);
  return ms;
}

double link_seconds(Node& client, Node& server, const std::vector<std::string>& addr, uint64_t bytes, int streams) {
  std::promise<Result<uint64_t>> done;
  auto start = Clock::now();
  boost::asio::post(client.io, [&] {
    client.service->speed_test(server.id.public_key(), addr, bytes, streams,
                               [&](Result<uint64_t> r) { done.set_value(std::move(r)); });
  });
  auto r = done.get_future().get();
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r || *r != bytes) {
    std::fprintf(stderr, "link transfer failed: %s\n", r ? "byte count mismatch" : r.error().to_string().c_str());
    std::exit(1);
  }
  return s;
}

double link_handshake_ms(Node& client, Node& server, const std::vector<std::string>& addr, int count) {
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    std::promise<void> closed;
    boost::asio::post(client.io, [&] {
      client.service->disconnect(server.id.public_key(), "bench");
      closed.set_value();
    });
    closed.get_future().get();
    std::promise<Result<nlohmann::json>> done;
    boost::asio::post(client.io, [&] {
      client.service->call(server.id.public_key(), addr, "node.info", {},
                           [&](Result<nlohmann::json> r) { done.set_value(std::move(r)); });
    });
    auto r = done.get_future().get();
    if (!r) {
      std::fprintf(stderr, "handshake failed: %s\n", r.error().to_string().c_str());
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / count;
}

void report(const char* what, std::vector<double> ratios) {
  std::sort(ratios.begin(), ratios.end());
  std::printf("%s: median ratio %.2f (min %.2f, max %.2f)\n\n", what, ratios[ratios.size() / 2], ratios.front(),
              ratios.back());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t bytes = 1ull << 30;
  int pairs = 7;
  int handshakes = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--bytes=", 0) == 0) bytes = parse_size(a.substr(8)).value();
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
    if (a.rfind("--handshakes=", 0) == 0) handshakes = std::max(1, std::atoi(a.c_str() + 13));
  }
  spdlog::set_level(spdlog::level::warn);  // sessions log their ends at info
  Node provider, consumer;
  provider.start(consumer.id.public_key(), "provider");
  consumer.start(provider.id.public_key(), "consumer");
  Status listening = provider.on_loop([&] { return provider.service->listen("127.0.0.1:0"); });
  if (!listening) return 1;
  std::vector<std::string> addr = {"127.0.0.1:" + std::to_string(provider.on_loop([&] { return provider.service->port(); }))};

  double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf("throughput, %.0f MiB per run, loopback, 2 threads (one per node)\n", mib);
  std::printf("%-5s %12s %12s %12s %8s %8s\n", "pair", "tcp MB/s", "link MB/s", "16str MB/s", "ratio", "16 ratio");
  std::vector<double> r1, r16;
  for (int p = 0; p < pairs; ++p) {
    double tcp = raw_tcp_seconds(bytes);
    double one = link_seconds(consumer, provider, addr, bytes, 1);
    double many = link_seconds(consumer, provider, addr, bytes, 16);
    double mb = static_cast<double>(bytes) / 1e6;
    r1.push_back(tcp / one);
    r16.push_back(tcp / many);
    std::printf("%-5d %12.0f %12.0f %12.0f %8.2f %8.2f\n", p + 1, mb / tcp, mb / one, mb / many, tcp / one, tcp / many);
  }
  report("link (1 stream) / raw TCP throughput", r1);
  report("link (16 streams) / raw TCP throughput", r16);

  std::printf("handshake + first request, %d per run\n%-5s %12s %12s %8s\n", handshakes, "pair", "tcp ms", "link ms",
              "ratio");
  std::vector<double> rh;
  for (int p = 0; p < pairs; ++p) {
    double tcp = raw_connect_ms(handshakes);
    double lnk = link_handshake_ms(consumer, provider, addr, handshakes);
    rh.push_back(lnk / tcp);
    std::printf("%-5d %12.3f %12.3f %8.1f\n", p + 1, tcp, lnk, lnk / tcp);
  }
  report("link handshake / TCP connect+round trip (time)", rh);
  consumer.stop();
  provider.stop();
  return 0;
}
