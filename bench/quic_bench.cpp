// The two link carriers side by side on loopback, in one run:
//   throughput: N bytes through a QuicChannel (QUIC stream 0 over UDP,
//               ngtcp2 + GnuTLS), a TlsChannel (TLS 1.3 over TCP, OpenSSL)
//               and a plain TCP socket, one direction, each end on its own
//               thread and event loop;
//   handshake:  a confirmed QUIC handshake (raw keys checked both ways)
//               versus TCP connect + TLS 1.3 handshake (pinned keys). Each
//               QUIC handshake comes from its own loopback address
//               (127.0.0.2, .3, ...): the server lets one source address
//               start only a burst of 8 and then 2 a second, and the bench
//               measures the handshake, not that budget.
// Runs the three back to back over --pairs rounds (default 3) and prints the
// ratios and their medians (the machine drifts; see docs/benchmarks.md).
// Usage: quic_bench [--bytes=256M] [--pairs=3] [--handshakes=20]
#include <utility>  // before Boost.Asio (GCC 12)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

#include "bench_tcp.h"
#include "crypto/identity.h"
#include "crypto/scope.h"
#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "net/quic/quic_endpoint.h"

namespace {

using namespace yonder;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

struct Loop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~Loop() {
    work.reset();
    io.stop();
    thread.join();
  }
  template <typename F>
  auto on_loop(F f) {
    std::promise<decltype(f())> p;
    asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
};

// Writes `bytes` in 256 KiB chunks, then shuts the channel down.
void send_all(std::shared_ptr<link::Channel> ch, uint64_t bytes) {
  struct State {
    std::shared_ptr<link::Channel> ch;
    Bytes block = Bytes(256 * 1024, 0x5a);
    uint64_t left;
  };
  auto st = std::make_shared<State>(State{std::move(ch), Bytes(256 * 1024, 0x5a), bytes});
  auto step = std::make_shared<std::function<void()>>();
  *step = [st, step] {
    if (st->left == 0) {
      st->ch->async_shutdown([st, step](error_code) { *step = nullptr; });
      return;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(st->left, st->block.size()));
    st->ch->async_write(ByteView(st->block.data(), n), [st, step](error_code ec, size_t k) {
      if (ec) {
        std::fprintf(stderr, "write failed: %s\n", ec.message().c_str());
        std::exit(1);
      }
      st->left -= k;
      (*step)();
    });
  };
  (*step)();
}

// Reads until EOF; `done` gets the byte count.
void receive_all(std::shared_ptr<link::Channel> ch, std::function<void(uint64_t)> done) {
  struct State {
    std::shared_ptr<link::Channel> ch;
    std::vector<uint8_t> buf = std::vector<uint8_t>(64 * 1024);
    uint64_t got = 0;
    std::function<void(uint64_t)> done;
  };
  auto st = std::make_shared<State>();
  st->ch = std::move(ch);
  st->done = std::move(done);
  auto step = std::make_shared<std::function<void()>>();
  *step = [st, step] {
    st->ch->async_read_some(st->buf.data(), st->buf.size(), [st, step](error_code ec, size_t n) {
      if (ec) {
        st->done(st->got);
        *step = nullptr;
        return;
      }
      st->got += n;
      (*step)();
    });
  };
  (*step)();
}

// Time from the first write until the receiver saw EOF after `bytes`.
double transfer_seconds(Loop& tx, std::shared_ptr<link::Channel> sender, Loop& rx,
                        std::shared_ptr<link::Channel> receiver, uint64_t bytes) {
  std::promise<uint64_t> got;
  auto start = Clock::now();
  asio::post(rx.io, [&] { receive_all(receiver, [&](uint64_t n) { got.set_value(n); }); });
  asio::post(tx.io, [&] { send_all(sender, bytes); });
  uint64_t n = got.get_future().get();
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (n != bytes) {
    std::fprintf(stderr, "transfer lost bytes: %llu of %llu\n", static_cast<unsigned long long>(n),
                 static_cast<unsigned long long>(bytes));
    std::exit(1);
  }
  return s;
}

// --- QUIC ---
struct QuicPair {
  std::shared_ptr<quic::QuicEndpoint> client_ep, server_ep;
};

QuicPair quic_endpoints(Loop& a, Loop& b, const Identity& ca, const Identity& sb) {
  auto lo = asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0);
  QuicPair p;
  p.client_ep = a.on_loop([&] { return quic::QuicEndpoint::bind(a.io.get_executor(), ca, lo).value(); });
  p.server_ep = b.on_loop([&] { return quic::QuicEndpoint::bind(b.io.get_executor(), sb, lo).value(); });
  return p;
}

// One confirmed connection: both ends' channels.
std::pair<std::shared_ptr<quic::QuicChannel>, std::shared_ptr<quic::QuicChannel>> quic_connect(
    Loop& a, Loop& b, QuicPair& p, const Identity& ca, const Identity& sb) {
  std::promise<std::shared_ptr<quic::QuicChannel>> server_side, client_side;
  b.on_loop([&] {
    p.server_ep->listen([k = ca.public_key()](const PublicKeyBytes& key) { return key == k; },
                        [&](std::shared_ptr<quic::QuicChannel> ch, PublicKeyBytes) { server_side.set_value(ch); });
    return 0;
  });
  auto target = p.server_ep->local_endpoint();
  asio::post(a.io, [&] {
    p.client_ep->connect(target, sb.public_key(), [&](Result<std::shared_ptr<quic::QuicChannel>> r) {
      if (!r) {
        std::fprintf(stderr, "QUIC connect failed: %s\n", r.error().to_string().c_str());
        std::exit(1);
      }
      client_side.set_value(*r);
    });
  });
  auto c = client_side.get_future().get();
  auto s = server_side.get_future().get();
  return {c, s};
}

// --- TLS over TCP ---
struct TlsSetup {
  std::shared_ptr<link::TlsContext> client_ctx, server_ctx;
};

std::pair<std::shared_ptr<link::TlsChannel>, std::shared_ptr<link::TlsChannel>> tls_connect(
    Loop& a, Loop& b, TlsSetup& t, const Identity& ca, const Identity& sb) {
  asio::ip::tcp::acceptor acceptor(b.io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto target = acceptor.local_endpoint();
  std::promise<std::shared_ptr<link::TlsChannel>> server_side, client_side;
  asio::post(b.io, [&] {
    acceptor.async_accept([&](error_code ec, asio::ip::tcp::socket s) {
      if (ec) std::exit(1);
      auto ch = std::make_shared<link::TlsChannel>(std::move(s), t.server_ctx->native(), true);
      link::TlsContext::set_policy(ch->native_handle(), [k = ca.public_key()](const PublicKeyBytes& key) {
        return key == k ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
      });
      ch->async_handshake([&, ch](error_code hec) {
        if (hec) std::exit(1);
        server_side.set_value(ch);
      });
    });
  });
  asio::post(a.io, [&] {
    auto sock = std::make_shared<asio::ip::tcp::socket>(a.io);
    sock->async_connect(target, [&, sock](error_code ec) {
      if (ec) std::exit(1);
      auto ch = std::make_shared<link::TlsChannel>(std::move(*sock), t.client_ctx->native(), false);
      link::TlsContext::set_policy(ch->native_handle(), [k = sb.public_key()](const PublicKeyBytes& key) {
        return key == k ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
      });
      ch->async_handshake([&, ch](error_code hec) {
        if (hec) {
          std::fprintf(stderr, "TLS handshake failed\n");
          std::exit(1);
        }
        client_side.set_value(ch);
      });
    });
  });
  auto c = client_side.get_future().get();
  auto s = server_side.get_future().get();
  b.on_loop([&] {
    acceptor.close();
    return 0;
  });
  return {c, s};
}

// --- raw TCP anchor ---
double raw_tcp_seconds(uint64_t bytes) { return bench::raw_tcp_seconds(bytes, 256 * 1024); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t bytes = 256ull << 20;
  int pairs = 3;
  int handshakes = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--bytes=", 0) == 0) bytes = parse_size(a.substr(8)).value();
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
    if (a.rfind("--handshakes=", 0) == 0) handshakes = std::max(1, std::atoi(a.c_str() + 13));
  }
  Identity ca = Identity::generate().value();
  Identity sb = Identity::generate().value();
  Loop a, b;
  TlsSetup tls{link::TlsContext::create(ca, false).value(), link::TlsContext::create(sb, true).value()};
  QuicPair qp = quic_endpoints(a, b, ca, sb);
  std::printf("QUIC carrier: GSO %s, GRO %s\n", qp.client_ep->gso_enabled() ? "on" : "off (kernel lacks UDP_SEGMENT)",
              qp.client_ep->gro_enabled() ? "on" : "off (kernel lacks UDP_GRO)");

  double mb = static_cast<double>(bytes) / 1e6;
  std::printf("throughput, %.0f MiB per run, one direction, loopback, one thread per end\n",
              static_cast<double>(bytes) / (1 << 20));
  std::printf("%-5s %10s %10s %10s %12s %12s\n", "round", "tcp MB/s", "tls MB/s", "quic MB/s", "quic/tls", "quic/tcp");
  std::vector<double> q_tls, q_tcp;
  for (int p = 0; p < pairs; ++p) {
    double tcp = raw_tcp_seconds(bytes);
    auto [tc, ts] = tls_connect(a, b, tls, ca, sb);
    double tl = transfer_seconds(a, tc, b, ts, bytes);
    auto [qc, qs] = quic_connect(a, b, qp, ca, sb);
    double qu = transfer_seconds(a, qc, b, qs, bytes);
    a.on_loop([&, tc = tc, qc = qc] {
      tc->close();
      qc->close();
      return 0;
    });
    b.on_loop([&, ts = ts, qs = qs] {
      ts->close();
      qs->close();
      return 0;
    });
    q_tls.push_back(tl / qu);
    q_tcp.push_back(tcp / qu);
    std::printf("%-5d %10.0f %10.0f %10.0f %12.2f %12.2f\n", p + 1, mb / tcp, mb / tl, mb / qu, tl / qu, tcp / qu);
  }
  std::printf("QUIC / TLS-over-TCP throughput: median ratio %.2f\n", median(q_tls));
  std::printf("QUIC / raw TCP throughput: median ratio %.2f\n\n", median(q_tcp));

  std::printf("handshake to a confirmed, key-checked channel, %d per round\n", handshakes);
  std::printf("%-5s %10s %10s %10s\n", "round", "tls ms", "quic ms", "quic/tls");
  std::vector<double> h;
  uint32_t sources = 0;
  for (int p = 0; p < pairs; ++p) {
    auto t0 = Clock::now();
    for (int i = 0; i < handshakes; ++i) {
      auto [c, s] = tls_connect(a, b, tls, ca, sb);
      a.on_loop([c = c] { c->close(); return 0; });
      b.on_loop([s = s] { s->close(); return 0; });
    }
    double tl = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / handshakes;
    t0 = Clock::now();
    for (int i = 0; i < handshakes; ++i) {
      QuicPair fresh = qp;
      auto source = asio::ip::make_address_v4(0x7f000002u + static_cast<uint32_t>(sources++ % 250));
      auto from = asio::ip::udp::endpoint(source, 0);
      fresh.client_ep = a.on_loop([&] { return quic::QuicEndpoint::bind(a.io.get_executor(), ca, from).value(); });
      auto [c, s] = quic_connect(a, b, fresh, ca, sb);
      a.on_loop([c = c, ep = fresh.client_ep] {
        c->close();
        ep->close();
        return 0;
      });
      b.on_loop([s = s] { s->close(); return 0; });
    }
    double qu = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / handshakes;
    h.push_back(qu / tl);
    std::printf("%-5d %10.3f %10.3f %10.2f\n", p + 1, tl, qu, qu / tl);
  }
  std::printf("QUIC / TLS-over-TCP handshake time: median ratio %.2f\n", median(h));
  a.on_loop([&] {
    qp.client_ep->close();
    return 0;
  });
  b.on_loop([&] {
    qp.server_ep->close();
    return 0;
  });
  return 0;
}
