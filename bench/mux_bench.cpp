// Throughput of the stream multiplexer alone, in memory: bytes written on one
// Mux, carried to a second Mux in 256 KiB pieces (what a TLS write would
// take) and read back out, through one stream and spread over 64 streams.
// The anchor is a plain memcpy pipe moving the same bytes through a buffer
// of the same size, i.e. the floor for moving bytes at all; the ratio says
// what framing, flow control and scheduling cost on top.
//
// Measured A B A B over --pairs pairs (default 7), ratio per pair and the
// median, because this machine's speed drifts by tens of percent over
// minutes. --mib=N sets the bytes per run (default 256; ctest uses 8).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net/link/mux.h"

namespace {

using namespace yonder;
using namespace yonder::link;
using Clock = std::chrono::steady_clock;

constexpr size_t kCarrierChunk = 256 * 1024;  // one carrier write
constexpr size_t kAppChunk = 64 * 1024;       // one application write

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The anchor: source -> carrier buffer -> destination, a chunk at a time.
double run_memcpy_pipe(const Bytes& source, Bytes& sink) {
  auto start = Clock::now();
  Bytes carrier(kCarrierChunk);
  for (size_t pos = 0; pos < source.size(); pos += kCarrierChunk) {
    size_t n = std::min(kCarrierChunk, source.size() - pos);
    std::memcpy(carrier.data(), source.data() + pos, n);
    std::memcpy(sink.data() + pos, carrier.data(), n);
  }
  return seconds_since(start);
}

// Sends `source` split evenly over `streams` streams from a dialer to an
// acceptor; the acceptor reads everything as it arrives.
double run_mux(const Bytes& source, Bytes& sink, int streams) {
  auto start = Clock::now();
  MonoTime now{};
  Mux tx(Role::kDialer, now);
  Mux rx(Role::kAcceptor, now);
  const size_t share = source.size() / static_cast<size_t>(streams);
  struct Flow {
    StreamId id;
    size_t begin, sent, received;
  };
  std::vector<Flow> flows;
  for (int i = 0; i < streams; ++i) {
    auto id = tx.open_stream(StreamKind::kFile);
    if (!id.ok()) std::abort();
    flows.push_back({*id, share * static_cast<size_t>(i), 0, 0});
  }
  Bytes carrier;
  size_t done = 0;
  while (done < share * flows.size()) {
    for (auto& f : flows) {
      while (f.sent < share) {
        size_t n = std::min(kAppChunk, share - f.sent);
        auto took = tx.write(f.id, ByteView(source.data() + f.begin + f.sent, n));
        if (!took.ok()) std::abort();
        if (*took == 0) break;
        f.sent += *took;
      }
    }
    while (tx.has_output()) {
      carrier.clear();  // one reused buffer, as a socket write loop would
      tx.take_output(carrier, kCarrierChunk);
      rx.feed(carrier, now);
    }
    while (rx.poll_event()) {
    }
    for (auto& f : flows) {
      while (rx.readable(f.id) > 0) {
        Bytes b = rx.read(f.id, kAppChunk);
        std::memcpy(sink.data() + f.begin + f.received, b.data(), b.size());
        f.received += b.size();
        done += b.size();
      }
    }
    while (rx.has_output()) {  // credit going back
      carrier.clear();
      rx.take_output(carrier, kCarrierChunk);
      tx.feed(carrier, now);
    }
    while (tx.poll_event()) {
    }
  }
  return seconds_since(start);
}

void check_same(const Bytes& a, const Bytes& b, size_t n) {
  if (std::memcmp(a.data(), b.data(), n) != 0) {
    std::fprintf(stderr, "bytes differ after the run\n");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 7;
  size_t mib = 256;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--pairs=", 0) == 0) pairs = std::max(1, std::atoi(a.c_str() + 8));
    if (a.rfind("--mib=", 0) == 0) mib = static_cast<size_t>(std::max(1, std::atoi(a.c_str() + 6)));
    if (a.rfind("--benchmark_min_time=", 0) == 0) mib = 8;  // the quick ctest run
  }
  const size_t size = mib << 20;
  Bytes source(size);
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (auto& b : source) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  Bytes sink(size);
  for (int streams : {1, 64}) {
    std::vector<double> ratios;
    std::printf("%d stream(s), %zu MiB per run\n", streams, mib);
    std::printf("%-6s %14s %14s %8s\n", "pair", "memcpy MB/s", "mux MB/s", "ratio");
    for (int p = 0; p < pairs; ++p) {
      std::memset(sink.data(), 0, size);  // touch the pages again before each run
      double anchor = run_memcpy_pipe(source, sink);
      check_same(source, sink, size);
      std::memset(sink.data(), 0, size);
      double mux = run_mux(source, sink, streams);
      check_same(source, sink, size / static_cast<size_t>(streams) * static_cast<size_t>(streams));
      ratios.push_back(mux / anchor);
      std::printf("%-6d %14.0f %14.0f %8.2f\n", p + 1, size / anchor / 1e6, size / mux / 1e6, mux / anchor);
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("median ratio (mux time / memcpy pipe time), %d stream(s): %.2f over %d pairs\n\n", streams,
                ratios[ratios.size() / 2], pairs);
  }
  return 0;
}
