// The relay server: accepts node connections on one TCP port, runs the
// registry's decisions (registry.h) against real sockets, joins pipe ends and
// copies their bytes, enforces per-node bandwidth, and serves its counters
// over HTTP. The protocol is described in protocol.h, the design in README.md.
//
// Threading: one io_context thread runs everything; construct, call and
// destroy the server on that thread (or before the loop runs). stop() closes
// every connection; the loop then runs out of work.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "relay/metrics.h"
#include "relay/monthly_allowance.h"
#include "relay/registry.h"

namespace boost::asio {
class io_context;
}

namespace yonder::relay {

struct RelayConfig {
  RegistryLimits registry;
  size_t max_connections = 4096;  // open TCP connections, all kinds
  // Bytes a second each node may send through pipes (0: no limit), and the
  // burst it may send at once. Charged to the sending node, so a node over
  // its budget slows its own pipes and nobody else's.
  double node_rate = 50e6;
  double node_burst = 4 * 1024 * 1024;
  std::map<PublicKeyBytes, double> node_rate_overrides;  // per key (0: no limit)
  // Bytes a second all nodes together may send through pipes (0: no limit),
  // and the burst: a relay on a home connection leaves its owner the rest
  // of the uplink. Each node stays under its own rate within it.
  double total_rate = 0;
  double total_burst = 4 * 1024 * 1024;
  // Bytes all pipes may carry in a calendar month, UTC (0: no cap), and what
  // they carried before this server started (the embedder keeps it on disk:
  // it hears the usage through on_monthly_usage after every
  // kMonthlyUsageReport bytes, when the cap is reached, and at stop()).
  uint64_t monthly_bytes = 0;
  MonthlyUsage monthly_usage;
  std::function<void(const MonthlyUsage&)> on_monthly_usage;
  // Control messages per connection (signal, pipe, peers, ping): burst and rate.
  double message_burst = 100;
  double message_rate = 20;
  size_t max_signal_bytes = kMaxSignalBytes;
  std::chrono::milliseconds handshake_timeout{10'000};   // TLS handshake + register, or pipe preface
  std::chrono::milliseconds idle_timeout{90'000};        // control connection without a message
  std::chrono::milliseconds pipe_idle_timeout{300'000};  // pipe without a byte either way
  size_t pipe_buffer_bytes = 256 * 1024;                 // per direction, allocated when joined
  // STUN over UDP on the same port number as the TCP listener (stun_responder.h):
  // answers a second, at most `stun_burst` at once. `stun` false: no UDP socket.
  bool stun = true;
  double stun_rate = 500;
  double stun_burst = 1000;
  // When set, only nodes it accepts may register (a yonderd that relays for
  // its own peers); others are refused with not_allowed after the handshake.
  std::function<bool(const PublicKeyBytes&)> accept_node;
  // When set, the nodes this relay hosts (a yonderd relaying for its own
  // peers): the others it accepts are visitors, at most
  // registry.max_visitors of them, and may reach hosted nodes only
  // (registry.h). Unset: every node is hosted.
  std::function<bool(const PublicKeyBytes&)> hosts_node;
};

// How many bytes the pipes carry between two reports of the monthly usage:
// a yonderd writes and syncs a file on its event loop for each, so at its
// default 25 MB/s that is one every 10 s, and a crash loses at most this
// much of the count.
constexpr uint64_t kMonthlyUsageReport = 256 * 1024 * 1024;

class RelayServer {
 public:
  // A debugging hook: every chunk of pipe bytes the relay copies, with the
  // node that sent it, before it is written on. Tests use it to show the
  // relay only ever held ciphertext; `yonder-relay --dump` writes it to a file.
  using Tap = std::function<void(const PublicKeyBytes& from, ByteView bytes)>;

  RelayServer(boost::asio::io_context& io, const Identity& identity, RelayConfig config);
  ~RelayServer();
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  // Binds "ip:port" (port 0 picks one) for nodes: TCP, and UDP for STUN on
  // the same port number (with config.stun). A UDP port that is taken is
  // an error when the port was given, and picks another pair with port 0.
  Status listen(const std::string& host_port);
  // Binds "ip:port" for GET /metrics (Prometheus text).
  Status listen_metrics(const std::string& host_port);
  boost::asio::ip::tcp::endpoint local_endpoint() const;
  // The STUN responder's UDP endpoint; unset without one.
  std::optional<boost::asio::ip::udp::endpoint> stun_endpoint() const;
  boost::asio::ip::tcp::endpoint metrics_endpoint() const;
  const PublicKeyBytes& key() const;

  // Stops accepting, tells registered nodes "shutting_down", closes every
  // connection and pipe. Idempotent.
  void stop();

  void set_tap(Tap tap);
  const Metrics& metrics() const;
  Gauges gauges() const;
  // What the pipes carried in the month they last carried anything.
  MonthlyUsage monthly_usage() const;
  std::string metrics_text() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace yonder::relay
