// The peer link service: listens for peers, dials them, pairs with share
// links, and carries requests (RPC) and byte streams over each TLS session.
//
// Life of a connection:
//   1. TCP connect; TLS 1.3 handshake in which each side's verify callback
//      checks the other's Ed25519 key (tls_context.h). The dialer expects
//      exactly one key. The acceptor asks its TrustPolicy: pinned, "pairing
//      only" (unknown key while a share link could pair it), or reject.
//   2. Pinned: the acceptor sends `hello` on the control stream; the dialer
//      answers with its own `hello`. Each side counts the session as
//      established when the other's first message arrives.
//      Pairing: the dialer sends `pair` (link id, secret, its name); the
//      acceptor sends nothing at all until then. A valid link pins the
//      dialer and the acceptor answers `pair_ok`; a revoked, expired or used
//      link gets `pair_error` (the dialer proved it holds the secret); a
//      wrong link id or secret gets the connection closed without a byte.
//   3. Requests: the caller opens an RPC stream, writes one message, and
//      half-closes; the acceptor authorises it against the caller's current
//      scope (every request, never cached), runs the handler, replies, closes.
//   4. Denying a peer closes its sessions at once (GOAWAY, then close).
//
// Threading: everything runs on the io_context thread it was built with.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/loop_timers.h"
#include "crypto/identity.h"
#include "crypto/scope.h"
#include "crypto/share_link.h"
#include "net/link/tls_context.h"

namespace boost::asio {
class io_context;
}

namespace yonder::link {

class Channel;  // net/link/channel.h

// Stream kinds this service speaks (wire::StreamKind values are open-ended).
enum class AppStreamKind : uint16_t {
  kRpc = 100,
  kEcho = 101,     // diagnostic: the acceptor sends back what it receives
  kDiscard = 102,  // diagnostic: the acceptor counts and drops what it receives
  // 103 was a one-way upload request; uploads now use a tunnel (jobs/files/upload_provider.h).
  kTunnel = 104,   // a request that becomes a two-way byte pipe (link_tunnel.cpp): port forwarding
};

// What the link needs to know from the node's trust store.
class TrustPolicy {
 public:
  virtual ~TrustPolicy() = default;
  virtual KeyVerdict classify(const PublicKeyBytes& key) = 0;
  // A pairing attempt. Ok: the dialer is now pinned; the JSON goes back in
  // pair_ok (our name and the scope granted). kNotFound: say nothing.
  virtual Result<nlohmann::json> redeem(const LinkIdBytes& id, const LinkSecret& secret, const PublicKeyBytes& key,
                                        const std::string& peer_name, const std::string& short_auth_string) = 0;
  // Every request: may this peer call `method` now?
  virtual Status authorize(const PublicKeyBytes& key, const std::string& method) = 0;
  virtual void seen(const PublicKeyBytes& key) = 0;
};

struct LinkConfig {
  std::string name;  // sent to pinned peers in hello, never to unknown ones
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  // Requests per peer: token bucket (burst, per second).
  double rate_burst = 200;
  double rate_per_second = 100;
  // What the request budget refills by: null is the real steady clock; a
  // simulation passes its own, so the budget counts simulated time.
  const LoopTimers* budget_clock = nullptr;
  // A session with nothing received for this long is dead (a PING goes out
  // after a third of it without traffic); the link then redials.
  std::chrono::milliseconds dead_after{45'000};
};

struct PairResult {
  PublicKeyBytes provider{};
  std::string provider_name;
  nlohmann::json granted;  // the scope the provider gave us
  nlohmann::json answer;   // the whole pair_ok message (node features add fields, e.g. "groups")
  std::string short_auth_string;
};

struct SessionInfo {
  PublicKeyBytes peer{};
  bool established = false;
  bool pairing_only = false;
  bool dialed = false;
  std::string path;
  bool draining = false;  // a better path took over; its last streams finish here
  std::optional<std::chrono::nanoseconds> rtt;
  size_t streams = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

// Handshakes since the service started, by the path's kind (its first word:
// "direct", "relay", "lan", "mapped", "punched", ...) and outcome: "ok" (a
// session established: TLS, then hello or pairing), or why it failed:
//   connect    the TCP connection to the address did not come up
//   timeout    the TLS handshake stalled past connect_timeout
//   tls        the TLS handshake broke (not our protocol, bad record, reset)
//   refused    a key was refused: the peer refused ours, or we refused its
//   wrong_key  the dialled address answered with another key than the peer's
//   pairing    a pairing attempt ended without pairing (unknown link, bad secret)
//   closed     the session ended after TLS but before it was established
struct HandshakeCount {
  std::string path_kind;
  std::string outcome;
  uint64_t count = 0;
};

// A byte carrier the link did not connect itself (a relay pipe; later a
// punched path): a connected stream socket, owned. The link runs the same
// pinned TLS handshake on it as on a direct connection.
struct Carrier {
  int fd = -1;          // ownership passes to the link
  std::string path;     // how it is shown: "relay via HOST:PORT"
  bool tls_client = true;  // this side runs the TLS client (the relay pipe's initiator)
};
// Opens a carrier to `peer`; `pairing` is set when the carrier is for
// redeeming that share link (the peer does not know us yet).
using CarrierDialer = std::function<void(const PublicKeyBytes& peer, const std::optional<ShareLink>& pairing,
                                         std::function<void(Result<Carrier>)> done)>;

// How good a session's path is: lower is better (in order of preference:
// LAN, known direct address, mapped port, punched, relay).
int path_rank(const std::string& path);

using RpcReply = std::function<void(Result<nlohmann::json>)>;
using RpcHandler = std::function<void(const PublicKeyBytes& peer, const nlohmann::json& params, RpcReply reply)>;

// One end of an open tunnel stream (link_tunnel.cpp): a two-way byte pipe
// with the mux's flow control both ways. Link thread only. Dropping the last
// reference without close() resets the stream.
class Tunnel {
 public:
  struct Handlers {
    // Bytes from the peer. Nothing more is read from the stream (so the
    // peer's window closes: back-pressure) until resume() is called.
    std::function<void(Bytes)> data;
    std::function<void()> eof;      // the peer half-closed, after its last byte
    std::function<void()> drained;  // a write() that returned false has gone out: write more
    // The peer reset the stream or the link died; the tunnel is dead.
    std::function<void(const std::string& why)> ended;
  };
  virtual ~Tunnel() = default;
  // Starts delivering events (bytes that arrived before are kept until then).
  virtual void start(Handlers handlers) = 0;
  // Queues bytes; false when some wait for credit (drained() follows).
  virtual bool write(ByteView bytes) = 0;
  virtual void resume() = 0;
  // Half-closes our side once queued bytes have gone.
  virtual void close() = 0;
  virtual void reset(const std::string& reason) = 0;
};
struct TunnelOpened {
  nlohmann::json result;  // the acceptor's answer to the request
  std::shared_ptr<Tunnel> tunnel;
};
// The acceptor's answer to a tunnel request: an error closes the stream;
// a result opens the pipe and returns its end (nullptr if the caller has
// gone meanwhile). Call it once, on the link's thread, now or later.
using TunnelAccept = std::function<std::shared_ptr<Tunnel>(Result<nlohmann::json>)>;
using TunnelHandler =
    std::function<void(const PublicKeyBytes& peer, const nlohmann::json& params, TunnelAccept accept)>;

class LinkService {
 public:
  LinkService(boost::asio::io_context& io, const Identity& identity, TrustPolicy& policy, LinkConfig config);
  ~LinkService();

  // Binds "host:port" (port 0 picks one) and starts accepting.
  Status listen(const std::string& host_port);
  uint16_t port() const;
  // Stops accepting and closes every session.
  void stop();

  // Registers a request method; the policy authorises each call.
  void add_method(const std::string& method, RpcHandler handler);
  bool has_method(const std::string& method) const;
  // Registers a tunnel method (a request answered with a byte pipe),
  // authorised like add_method's.
  void add_tunnel_method(const std::string& method, TunnelHandler handler);

  // Consumer side. Dials the link's addresses in order, pairs, and reports.
  void pair(const ShareLink& link, std::function<void(Result<PairResult>)> done);
  // Calls `method` on a pinned peer, reusing or dialling a session.
  void call(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, const std::string& method,
            const nlohmann::json& params, std::function<void(Result<nlohmann::json>)> done);
  // Opens a tunnel: sends the request, and on the acceptor's answer hands
  // back its result and our end of the pipe.
  void open_tunnel(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, const std::string& method,
                   const nlohmann::json& params, std::function<void(Result<TunnelOpened>)> done);
  // Round trips on one echo stream, `count` of them `interval` apart;
  // `progress` gets each RTT; `done` the end (an error if the stream died).
  void ping(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, int count,
            std::chrono::milliseconds interval, std::function<void(std::chrono::nanoseconds)> progress,
            std::function<void(Status)> done);
  // Sends `bytes` over `streams` parallel discard streams; reports what the
  // far side counted (a link throughput test, like iperf).
  void speed_test(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, uint64_t bytes, int streams,
                  std::function<void(Result<uint64_t>)> done);

  // Keeps a session to `peer` up: dials now if there is none, and redials
  // with exponential backoff (0.5 s doubling to 60 s, with jitter) whenever
  // it drops. Requests in flight on a dropped session fail at once with the
  // reason; they are not retried behind the caller's back. Called again
  // with other addresses (the peer moved), it dials them at once, without
  // the backoff earned at the old ones.
  void keep_connected(const PublicKeyBytes& peer, const std::vector<std::string>& addresses);
  void forget(const PublicKeyBytes& peer);

  // Paths besides dialling the addresses: when the direct addresses have
  // not answered within `head_start` (at once when there are none), the
  // dialer is asked for a carrier too, and the first session up wins.
  void set_carrier_dialer(CarrierDialer dialer, std::chrono::milliseconds head_start = std::chrono::milliseconds(500));
  // The far side opened a carrier to us (it dialled through a relay): run
  // our side of the handshake on it, with the same trust checks as an
  // accepted connection (or as a dialer when carrier.tls_client).
  void accept_carrier(Carrier carrier, const PublicKeyBytes& peer);
  // A carrier that authenticated `peer` itself (a QUIC channel on a punched
  // path, whose handshake pinned the peer's raw key): it becomes a session
  // as if dialled (`dialer`: this side sends hello first and owns the dial)
  // or accepted. Only for paired (pinned) peers; anything else is closed.
  // When it is established, a worse session to the peer drains, as with
  // try_path. `done` (optional) hears when it is established or failed.
  void adopt_channel(std::shared_ptr<Channel> channel, const PublicKeyBytes& peer, bool dialer, std::string path,
                     std::function<void(Status)> done = nullptr);
  // A possibly better path to a pinned peer (a LAN announcement, a mapped
  // port): dials `address` if our best session to the peer is worse than
  // `kind` ("lan", "direct", "mapped"). When it comes up, new streams use it
  // and the older session drains: its running streams (logs, forwards)
  // finish on it, none are cut.
  void try_path(const PublicKeyBytes& peer, const std::string& address, const std::string& kind);
  // Whether `peer` answers at `address` ("host:port") now: a TCP connection
  // and a TLS handshake that must prove `peer`'s key, then closed, never a
  // session (a dial-back, net/reach/dial_back.h). Ok, or why not, within
  // `within` for the connection and again for the handshake.
  void probe(const PublicKeyBytes& peer, const std::string& address, std::chrono::milliseconds within,
             std::function<void(Status)> done);

  // Called for every session with a pinned peer once it is established,
  // with its path (the daemon tells relayed peers about better paths).
  void on_established(std::function<void(const PublicKeyBytes& peer, const std::string& path)> hook);

  // Closes every session with `peer` now (used by deny).
  void disconnect(const PublicKeyBytes& peer, const std::string& reason);
  std::vector<SessionInfo> sessions() const;
  // Counters of handshakes (see HandshakeCount), for GET /metrics.
  std::vector<HandshakeCount> handshakes() const;

 private:
  void call_attempt(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, const std::string& method,
                    const nlohmann::json& params, std::function<void(Result<nlohmann::json>)> done, int attempt);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yonder::link
