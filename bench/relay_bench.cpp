// Throughput through a relay pipe against a direct connection, in one run.
// Both carry the same end-to-end TLS session the peer link would run (the
// link's TlsChannel, pinned Ed25519 keys, the pipe's initiator as client):
//   direct: sender --TLS/TCP--> receiver
//   relay:  sender --TLS/TCP--> yonder relay (copies bytes) --TCP--> receiver
// Three event-loop threads (sender, receiver, relay) on this 2-core machine,
// so the relay competes with both ends for CPU, as a relay on a provider's
// own host would. Runs A B A B over --pairs pairs (default 7) and prints
// each ratio and the median, since this machine drifts by tens of percent.
// Also prints the CPU seconds per GB each way (all threads): when both
// cores are busy, the ratio is about the inverse of the CPU ratio, and the
// difference is the kernel carrying every byte over two more TCP hops.
// Usage: relay_bench [--bytes=512M] [--pairs=7] [--copy]
// (--copy: the relay moves bytes through user space, as it does for a tap,
// instead of splice(2))
#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

#include "crypto/identity.h"
#include "crypto/scope.h"
#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "relay/client.h"
#include "relay/server.h"

namespace {

using namespace yonder;

// CPU seconds used so far by this process (all threads: both ends and the
// relay), or by the calling thread.
double cpu_seconds(int who = RUSAGE_SELF) {
  rusage u{};
  ::getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  template <typename F>
  auto on(F f) {
    std::promise<decltype(f())> p;
    asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
  void stop() {
    work.reset();
    io.stop();
    thread.join();
  }
};

struct Side {
  Loop* loop;
  const Identity* id;
  std::shared_ptr<link::TlsContext> ctx;
};

std::shared_ptr<link::TlsChannel> make_tls(tcp::socket s, const Side& me, const PublicKeyBytes& peer, bool server) {
  auto chan = std::make_shared<link::TlsChannel>(std::move(s), me.ctx->native(), server);
  link::TlsContext::set_policy(chan->native_handle(), [peer](const PublicKeyBytes& k) {
    return k == peer ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  });
  return chan;
}

// Handshakes both channels (each on its own loop) and waits.
void handshake(Loop& a, std::shared_ptr<link::TlsChannel> ca, Loop& b, std::shared_ptr<link::TlsChannel> cb) {
  std::promise<bool> pa, pb;
  asio::post(a.io, [&] { ca->async_handshake([&](boost::system::error_code ec) { pa.set_value(!ec); }); });
  asio::post(b.io, [&] { cb->async_handshake([&](boost::system::error_code ec) { pb.set_value(!ec); }); });
  if (!pa.get_future().get() || !pb.get_future().get()) {
    std::fprintf(stderr, "inner TLS handshake failed\n");
    std::exit(1);
  }
}

// Sends `bytes` from tx to rx; seconds from the first write to rx's EOF.
double transfer(Loop& txl, std::shared_ptr<link::TlsChannel> tx, Loop& rxl, std::shared_ptr<link::TlsChannel> rx,
                uint64_t bytes) {
  std::promise<uint64_t> received;
  auto rbuf = std::make_shared<std::vector<uint8_t>>(256 * 1024);
  auto count = std::make_shared<uint64_t>(0);
  auto read_loop = std::make_shared<std::function<void()>>();
  *read_loop = [rx, rbuf, count, read_loop, &received] {
    rx->async_read_some(rbuf->data(), rbuf->size(),
                        [rx, rbuf, count, read_loop, &received](boost::system::error_code ec, size_t n) {
                          *count += n;
                          if (ec) {
                            received.set_value(*count);
                            *read_loop = nullptr;
                            return;
                          }
                          (*read_loop)();
                        });
  };
  asio::post(rxl.io, [read_loop] { (*read_loop)(); });
  auto block = std::make_shared<std::vector<uint8_t>>(256 * 1024, 0x5a);
  auto left = std::make_shared<uint64_t>(bytes);
  auto write_loop = std::make_shared<std::function<void()>>();
  *write_loop = [tx, block, left, write_loop] {
    if (*left == 0) {
      tx->async_shutdown([write_loop](boost::system::error_code) { *write_loop = nullptr; });
      return;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(*left, block->size()));
    *left -= n;
    tx->async_write(ByteView(block->data(), n), [write_loop](boost::system::error_code ec, size_t) {
      if (ec) {
        std::fprintf(stderr, "write failed: %s\n", ec.message().c_str());
        std::exit(1);
      }
      (*write_loop)();
    });
  };
  auto start = Clock::now();
  asio::post(txl.io, [write_loop] { (*write_loop)(); });
  uint64_t got = received.get_future().get();
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (got != bytes) {
    std::fprintf(stderr, "received %llu of %llu bytes\n", static_cast<unsigned long long>(got),
                 static_cast<unsigned long long>(bytes));
    std::exit(1);
  }
  return s;
}

double direct_seconds(const Side& tx, const Side& rx, uint64_t bytes) {
  tcp::acceptor acc(rx.loop->io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::promise<tcp::socket> accepted;
  asio::post(rx.loop->io, [&] {
    acc.async_accept([&](boost::system::error_code, tcp::socket s) { accepted.set_value(std::move(s)); });
  });
  tcp::socket out(tx.loop->io);
  out.connect(acc.local_endpoint());
  out.set_option(tcp::no_delay(true));
  tcp::socket in = accepted.get_future().get();
  in.set_option(tcp::no_delay(true));
  auto ctx = make_tls(std::move(out), tx, rx.id->public_key(), false);
  auto crx = make_tls(std::move(in), rx, tx.id->public_key(), true);
  handshake(*tx.loop, ctx, *rx.loop, crx);
  double s = transfer(*tx.loop, ctx, *rx.loop, crx, bytes);
  tx.loop->on([&] {
    ctx->close();
    return 0;
  });
  rx.loop->on([&] {
    crx->close();
    return 0;
  });
  return s;
}

double relay_seconds(const Side& tx, std::shared_ptr<relay::RelayClient> ctx_client, const Side& rx,
                     std::shared_ptr<relay::RelayClient> crx_client, std::promise<Result<relay::RelayPipe>>*& incoming,
                     uint64_t bytes) {
  std::promise<Result<relay::RelayPipe>> mine, theirs;
  rx.loop->on([&] {
    incoming = &theirs;
    return 0;
  });
  asio::post(tx.loop->io, [&] {
    ctx_client->open_pipe(rx.id->public_key(), [&](Result<relay::RelayPipe> p) { mine.set_value(std::move(p)); });
  });
  auto a = mine.get_future().get();
  auto b = theirs.get_future().get();
  if (!a || !b) {
    std::fprintf(stderr, "pipe failed: %s\n", (!a ? a.error() : b.error()).to_string().c_str());
    std::exit(1);
  }
  auto ctx = make_tls(std::move(a->socket), tx, rx.id->public_key(), !a->initiator);
  auto crx = make_tls(std::move(b->socket), rx, tx.id->public_key(), !b->initiator);
  handshake(*tx.loop, ctx, *rx.loop, crx);
  double s = transfer(*tx.loop, ctx, *rx.loop, crx, bytes);
  tx.loop->on([&] {
    ctx->close();
    return 0;
  });
  rx.loop->on([&] {
    crx->close();
    return 0;
  });
  (void)crx_client;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t bytes = 512ull << 20;
  int pairs = 7;
  bool copy = false;  // through a user-space buffer instead of splice(2), as with a tap
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--bytes=", 0) == 0) bytes = parse_size(a.substr(8)).value();
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
    if (a == "--copy") copy = true;
  }
  spdlog::set_level(spdlog::level::warn);
  Identity relay_id = Identity::generate().value(), tx_id = Identity::generate().value(),
           rx_id = Identity::generate().value();
  Loop relay_loop, tx_loop, rx_loop;
  relay::RelayConfig cfg;
  cfg.node_rate = 0;  // measure the relay, not its limits
  auto server = relay_loop.on([&] {
    auto s = std::make_unique<relay::RelayServer>(relay_loop.io, relay_id, cfg);
    if (!s->listen("127.0.0.1:0")) std::exit(1);
    if (copy) s->set_tap([](const PublicKeyBytes&, ByteView) {});
    return s;
  });
  std::string address = "127.0.0.1:" + std::to_string(server->local_endpoint().port());
  Side tx{&tx_loop, &tx_id, link::TlsContext::create(tx_id, false).value()};
  Side rx{&rx_loop, &rx_id, link::TlsContext::create(rx_id, true).value()};

  std::promise<Result<relay::RelayPipe>>* incoming = nullptr;
  auto connect = [&](Loop& loop, const Identity& id, const PublicKeyBytes& peer, bool accept) {
    std::promise<Result<relay::Registration>> reg;
    auto client = loop.on([&] {
      relay::RelayClientConfig c;
      c.address = address;
      c.relay_key = relay_id.public_key();
      c.peers = {peer};
      auto cl = relay::RelayClient::create(loop.io, id, c).value();
      relay::RelayClient::Handlers h;
      if (accept) {
        h.pipe_wanted = [cl = cl.get(), &incoming](const PublicKeyBytes& from) {
          cl->open_pipe(from, [&incoming](Result<relay::RelayPipe> p) { incoming->set_value(std::move(p)); });
        };
      }
      cl->connect(h, [&](Result<relay::Registration> r) { reg.set_value(std::move(r)); });
      return cl;
    });
    auto r = reg.get_future().get();
    if (!r) {
      std::fprintf(stderr, "cannot register: %s\n", r.error().to_string().c_str());
      std::exit(1);
    }
    return client;
  };
  auto tx_client = connect(tx_loop, tx_id, rx_id.public_key(), false);
  auto rx_client = connect(rx_loop, rx_id, tx_id.public_key(), true);

  double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf("throughput, %.0f MiB per run, loopback, end-to-end TLS 1.3 both ways, 3 threads\n", mib);
  std::printf("cpu: CPU seconds per GB, all threads; of which the relay's own thread\n");
  std::printf("%-5s %12s %12s %7s %11s %11s %11s\n", "pair", "direct MB/s", "relay MB/s", "ratio", "direct cpu",
              "relay cpu", "relay thr");
  std::vector<double> ratios;
  auto relay_thread_cpu = [&] { return relay_loop.on([] { return cpu_seconds(RUSAGE_THREAD); }); };
  for (int p = 0; p < pairs; ++p) {
    double c0 = cpu_seconds();
    double d = direct_seconds(tx, rx, bytes);
    double c1 = cpu_seconds();
    double t1 = relay_thread_cpu();
    double r = relay_seconds(tx, tx_client, rx, rx_client, incoming, bytes);
    double c2 = cpu_seconds();
    double t2 = relay_thread_cpu();
    double mb = static_cast<double>(bytes) / 1e6;
    ratios.push_back(d / r);
    std::printf("%-5d %12.0f %12.0f %7.2f %11.2f %11.2f %11.2f\n", p + 1, mb / d, mb / r, d / r, (c1 - c0) / mb * 1e3,
                (c2 - c1) / mb * 1e3, (t2 - t1) / mb * 1e3);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("relay / direct throughput: median ratio %.2f (min %.2f, max %.2f)\n", ratios[ratios.size() / 2],
              ratios.front(), ratios.back());
  tx_loop.on([&] {
    tx_client->close();
    tx_client.reset();
    return 0;
  });
  rx_loop.on([&] {
    rx_client->close();
    rx_client.reset();
    return 0;
  });
  relay_loop.on([&] {
    server.reset();
    return 0;
  });  // stops it
  // Let the closes finish on their loops, then end the loops.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  tx_loop.stop();
  rx_loop.stop();
  relay_loop.stop();
  return 0;
}
