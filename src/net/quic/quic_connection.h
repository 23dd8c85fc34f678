// One QUIC v1 connection carrying one bidirectional stream (id 0), with TLS
// 1.3 over raw Ed25519 public keys (RFC 7250): the adapter between Yonder and
// ngtcp2 + its GnuTLS crypto backend.
//
// quic_connection.cpp is the ONLY file that includes ngtcp2 (or GnuTLS)
// headers: ngtcp2's API changed between 0.x (Debian 12 ships 0.12) and 1.x
// (settings, callbacks, conn_stat, transport params and the crypto glue all
// moved), so a port to 1.x touches that one file. This header exposes no
// ngtcp2 type.
//
// Sans socket: the owner feeds received datagrams and the time in, pulls
// datagrams to send out, and arms a timer for expiry(). Single-threaded (the
// event loop), never re-entered: callbacks are plain flags and buffers, the
// owner acts after each call returns.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/error.h"
#include "crypto/identity.h"
#include "net/quic/quic_config.h"

namespace yonder::quic {

// The node's key as TLS credentials (GnuTLS, raw public key). Made once per
// endpoint; shared by all its connections.
class QuicCredentials;
Result<std::shared_ptr<QuicCredentials>> make_credentials(const Identity& identity);

// The first bytes of a datagram say whether it can be QUIC at all: QUIC v1
// always sets bit 0x40 of the first byte (RFC 9000 17.2/17.3; RFC 9287 lets a
// peer grease it, which we never negotiate). Everything else (STUN, punch
// probes) belongs to someone else on the same socket.
inline bool looks_like_quic(ByteView datagram) { return !datagram.empty() && (datagram[0] & 0x40) != 0; }

// Our connection ids are this long; short-header packets carry no length.
constexpr size_t kConnectionIdLength = 16;

// What a datagram's header says, for routing (untrusted bytes; bounded by the
// datagram). `dcid` empty when the header does not decode.
struct DatagramHeader {
  std::string dcid;
  bool initial = false;  // a client Initial that may open a new connection
};
DatagramHeader decode_header(ByteView datagram);

class QuicConnection {
 public:
  using udp = boost::asio::ip::udp;
  struct Hooks {
    std::function<void(const std::string& cid)> cid_added;    // route this id to us
    std::function<void(const std::string& cid)> cid_removed;  // no longer
  };

  // A client connection to `remote` that accepts only `expected_peer`.
  static Result<std::unique_ptr<QuicConnection>> client(std::shared_ptr<QuicCredentials> creds,
                                                        const PublicKeyBytes& expected_peer, const udp::endpoint& local,
                                                        const udp::endpoint& remote, const QuicConfig& config,
                                                        Hooks hooks, MonoTime now);
  // A server connection for the client Initial `first` (which it reads).
  static Result<std::unique_ptr<QuicConnection>> server(std::shared_ptr<QuicCredentials> creds,
                                                        std::function<bool(const PublicKeyBytes&)> accept_key,
                                                        const udp::endpoint& local, const udp::endpoint& remote,
                                                        ByteView first, const QuicConfig& config, Hooks hooks,
                                                        MonoTime now);
  ~QuicConnection();
  QuicConnection(const QuicConnection&) = delete;
  QuicConnection& operator=(const QuicConnection&) = delete;

  // Feeds one received datagram. False once the connection is over (see
  // failure()).
  bool receive(ByteView datagram, const udp::endpoint& from, MonoTime now);
  // Writes the next datagrams into `out` (capacity `cap`): `*segment` bytes
  // each, the last one possibly shorter, all for `*to`; GSO-ready when
  // `*segment` < the result. 0: nothing to send now (pacing, congestion or
  // flow control, or nothing queued).
  size_t write_batch(uint8_t* out, size_t cap, size_t max_segments, size_t* segment, udp::endpoint* to, MonoTime now);
  // When on_expiry wants to run (retransmission, ACK delay, pacing,
  // keepalive, idle timeout).
  MonoTime expiry() const;
  // False once the connection is over (idle timeout, too many lost probes).
  bool on_expiry(MonoTime now);
  // A CONNECTION_CLOSE (NO_ERROR, or the TLS alert after a failed handshake)
  // for the peer; 0 if none can be sent. The connection is over afterwards.
  size_t write_close(uint8_t* out, size_t cap, udp::endpoint* to, MonoTime now);

  // Stream 0. The bytes are kept until the peer acknowledged them.
  void stream_append(ByteView data);
  // Stream offset up to which bytes went into packets at least once.
  uint64_t stream_sent() const { return tx_sent_; }
  uint64_t stream_queued() const { return tx_end_; }
  // Sends FIN after the queued bytes.
  void stream_finish() { fin_wanted_ = true; }
  // Every queued byte (and the FIN, if asked) acknowledged by the peer.
  bool stream_all_acked() const { return tx_acked_ == tx_end_ && (!fin_wanted_ || fin_sent_); }
  size_t stream_readable() const { return rx_.size() - rx_pos_; }
  // Copies up to `size` received bytes out and opens the window by as much.
  size_t stream_read(uint8_t* out, size_t size);
  // The peer's FIN arrived (after every byte readable now).
  bool stream_fin_received() const { return rx_fin_; }

  bool server_side() const { return server_; }
  bool confirmed() const { return confirmed_; }
  bool over() const { return over_; }
  // True when the peer ended the connection cleanly (NO_ERROR).
  bool closed_cleanly() const { return closed_cleanly_; }
  // Why the connection is over (or why the handshake failed), for people.
  const std::string& failure() const { return failure_; }
  const std::optional<PublicKeyBytes>& peer_key() const { return peer_key_; }
  std::chrono::nanoseconds smoothed_rtt() const;
  udp::endpoint remote() const { return remote_; }
  bool export_keying_material(std::string_view label, uint8_t* out, size_t size);

  struct Impl;  // ngtcp2 and GnuTLS state, in quic_connection.cpp

 private:
  QuicConnection() = default;
  friend struct Impl;
  std::unique_ptr<Impl> impl_;
  Hooks hooks_;
  bool server_ = false;
  bool confirmed_ = false;
  bool over_ = false;
  bool closed_cleanly_ = false;
  std::string failure_;
  std::optional<PublicKeyBytes> peer_key_;
  udp::endpoint remote_;
  // Stream 0, sending: chunks from offset tx_base_ on (acked ones dropped).
  std::vector<Bytes> tx_chunks_;
  size_t tx_chunk_head_ = 0;  // first live chunk in tx_chunks_
  uint64_t tx_base_ = 0;      // stream offset of tx_chunks_[tx_chunk_head_][0]
  uint64_t tx_acked_ = 0;
  uint64_t tx_sent_ = 0;
  uint64_t tx_end_ = 0;
  bool fin_wanted_ = false;
  bool fin_sent_ = false;
  bool stream_open_ = false;  // client: opened; server: the peer opened it
  bool open_frame_owed_ = false;  // client: announce stream 0 even without data
  // Stream 0, receiving.
  Bytes rx_;
  size_t rx_pos_ = 0;
  bool rx_fin_ = false;
};

}  // namespace yonder::quic
