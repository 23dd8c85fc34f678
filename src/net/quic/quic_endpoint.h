// QuicEndpoint: one UDP socket shared by QUIC connections (both directions)
// and by whoever else talks on it (the hole puncher's probes, the STUN
// client), so that the NAT mapping the puncher opens is the one QUIC uses.
//
// Demultiplexing of every received datagram:
//   first byte 0x00-0x3f (bit 0x40 clear)  not QUIC (QUIC v1 always sets it):
//                                          on_other_datagram
//   destination connection id known        that connection
//   a QUIC v1 Initial, listening           a new server-side connection
//   anything else                          dropped
//
// Sending: each connection's packets leave in batches of equal-size
// datagrams, under 64 KB, as one sendmsg with UDP_SEGMENT (GSO) where the
// kernel offers it, one datagram per call otherwise (the first EIO/EINVAL
// from GSO turns it off for the socket).
//
// Event-loop thread only. Owned by a shared_ptr: connections hold a weak one.
#pragma once

#include <sys/types.h>
#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/token_bucket.h"
#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "net/quic/quic_channel.h"
#include "net/quic/quic_config.h"

namespace yonder::quic {

class QuicEndpoint : public std::enable_shared_from_this<QuicEndpoint> {
 public:
  using udp = boost::asio::ip::udp;
  using OtherDatagram = std::function<void(const udp::endpoint& from, ByteView data)>;
  using AcceptKey = std::function<bool(const PublicKeyBytes&)>;
  using OnChannel = std::function<void(std::shared_ptr<QuicChannel>, PublicKeyBytes)>;

  // A new socket bound to `local` (port 0: any).
  static Result<std::shared_ptr<QuicEndpoint>> bind(boost::asio::any_io_executor ex, const Identity& identity,
                                                    const udp::endpoint& local, QuicConfig config = {});
  // Takes over a socket that is already bound (the puncher's).
  static Result<std::shared_ptr<QuicEndpoint>> adopt(udp::socket socket, const Identity& identity,
                                                     QuicConfig config = {});
  ~QuicEndpoint();
  QuicEndpoint(const QuicEndpoint&) = delete;
  QuicEndpoint& operator=(const QuicEndpoint&) = delete;

  udp::endpoint local_endpoint() const { return local_; }
  boost::asio::any_io_executor get_executor() { return socket_.get_executor(); }
  const QuicConfig& config() const { return config_; }
  bool gso_enabled() const { return gso_; }
  bool gro_enabled() const { return gro_; }

  // Datagrams that are not QUIC (first byte 0x00-0x3f).
  void on_other_datagram(OtherDatagram handler) { other_ = std::move(handler); }
  // Sends one datagram now (for the puncher and STUN). `ttl`: IP TTL (IPv6
  // hop limit) for this datagram only, so a probe can open the local NAT
  // mapping and die before the far NAT.
  Status send_to(const udp::endpoint& to, ByteView data, std::optional<int> ttl = std::nullopt);

  // Opens a QUIC connection to `remote` that accepts only `expected_peer`'s
  // key. `done` hears once: the channel after a confirmed handshake, or why
  // not (a different key, the peer refused ours, no answer within
  // config().connect_timeout). The first packet leaves before this returns.
  void connect(const udp::endpoint& remote, const PublicKeyBytes& expected_peer, QuicChannel::Ready done);
  // Accepts connections from keys `accept_key` allows; `on_channel` gets each
  // one after its handshake is confirmed.
  void listen(AcceptKey accept_key, OnChannel on_channel);

  // Closes every connection (CONNECTION_CLOSE) and the socket.
  void close();

  // Handles `data` as if it had arrived from `from` (the fuzz target feeds
  // datagrams this way; replies go out on the socket as usual).
  void inject_datagram(const udp::endpoint& from, ByteView data);

  // Counters, for tests and `yonder netcheck`.
  struct Stats {
    uint64_t datagrams_in = 0;
    uint64_t datagrams_out = 0;
    uint64_t batches_out = 0;
    uint64_t batches_in = 0;  // receive calls that returned bytes; fewer than datagrams_in with GRO
    uint64_t other_in = 0;
    uint64_t dropped_in = 0;  // unroutable, or the test loss knob
    uint64_t handshakes_limited = 0;  // new Initials dropped: too many from one source address
  };
  // New handshakes one source address may start: a burst, then one per
  // interval. Checked before any crypto work.
  static constexpr int kHandshakeBurst = 8;
  static constexpr std::chrono::milliseconds kHandshakeInterval{500};
  const Stats& stats() const { return stats_; }

 private:
  friend class QuicChannel;
  QuicEndpoint(udp::socket socket, std::shared_ptr<QuicCredentials> creds, QuicConfig config);
  void start();
  void receive_some();
  void handle(const udp::endpoint& from, ByteView data, std::vector<std::shared_ptr<QuicChannel>>& touched);
  ssize_t receive_batch(size_t* segment);

  // For QuicChannel.
  enum class SendResult { kSent, kWouldBlock, kFailed };
  SendResult send_batch(const udp::endpoint& to, const uint8_t* data, size_t len, size_t segment);
  void wait_writable(std::function<void()> then);
  void route(const std::string& cid, const std::shared_ptr<QuicChannel>& channel) { routes_[cid] = channel; }
  void unroute(const std::string& cid, const QuicChannel* channel);
  std::shared_ptr<QuicCredentials> credentials() const { return creds_; }

  udp::socket socket_;
  udp::endpoint local_;
  std::shared_ptr<QuicCredentials> creds_;
  QuicConfig config_;
  bool gso_ = false;
  bool gro_ = false;
  bool closed_ = false;
  OtherDatagram other_;
  AcceptKey accept_key_;
  OnChannel on_channel_;
  std::unordered_map<std::string, std::shared_ptr<QuicChannel>> routes_;
  Bytes rx_;
  udp::endpoint rx_from_;
  uint64_t quic_in_ = 0;
  Stats stats_;
  // By source address (not port), at most kMaxHandshakeSources of them.
  std::unordered_map<std::string, TokenBucket> handshake_budget_;
};

}  // namespace yonder::quic
