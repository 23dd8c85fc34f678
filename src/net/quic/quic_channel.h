// QuicChannel: the link's byte channel (link::Channel) over one
// bidirectional QUIC stream (client-initiated stream 0) of a QUIC v1
// connection. Made by a QuicEndpoint (connect or listen), handed out only once
// the handshake is confirmed and both raw keys were checked.
//
// Writes are copied into the stream's send buffer and complete once every
// byte of them went into a packet (QUIC keeps them until acknowledged), so a
// writer is paced by congestion and flow control. Reads give what arrived,
// or eof after the peer's FIN or clean CONNECTION_CLOSE. async_shutdown sends
// FIN, waits until the peer acknowledged everything, then CONNECTION_CLOSE.
//
// Event-loop thread only. At most one read and one write outstanding, as for
// every Channel; handlers are never called from inside the call that took
// them.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "net/link/channel.h"
#include "net/quic/quic_connection.h"

namespace yonder::quic {

class QuicEndpoint;

class QuicChannel final : public link::Channel, public std::enable_shared_from_this<QuicChannel> {
 public:
  using udp = boost::asio::ip::udp;
  using Ready = std::function<void(Result<std::shared_ptr<QuicChannel>>)>;

  ~QuicChannel() override;
  QuicChannel(const QuicChannel&) = delete;
  QuicChannel& operator=(const QuicChannel&) = delete;

  boost::asio::any_io_executor get_executor() override { return timer_.get_executor(); }
  void async_read_some(uint8_t* buffer, size_t size, IoHandler done) override;
  void async_write(ByteView data, IoHandler done) override;
  void async_shutdown(Handler done) override;
  void close() override;
  bool export_keying_material(std::string_view label, uint8_t* out, size_t size) override;

  // The peer's key, checked in the handshake.
  PublicKeyBytes peer_key() const;
  // Smoothed round-trip time (RFC 9002 5.3), from ngtcp2.
  std::chrono::nanoseconds rtt() const { return conn_->smoothed_rtt(); }
  // Where the peer's packets come from now (it may move: NAT rebinding).
  udp::endpoint remote_endpoint() const { return conn_->remote(); }
  // For `yonder peers` and path ranking: "punched quic 203.0.113.7:41641".
  std::string path_string() const;
  bool is_open() const { return !finished_; }

 private:
  friend class QuicEndpoint;
  QuicChannel(std::shared_ptr<QuicEndpoint> endpoint, boost::asio::any_io_executor ex);

  // Endpoint side.
  void on_datagram(const udp::endpoint& from, ByteView data, MonoTime now);
  void after_io();  // once per batch of datagrams, timer or call
  void start_handshake_timer(std::chrono::milliseconds timeout);
  QuicConnection::Hooks hooks();

  void flush();
  bool send_pending();
  void deliver_read();
  void arm_timer();
  void send_close();
  void finish(bool call_handlers);
  boost::system::error_code end_error() const;

  std::weak_ptr<QuicEndpoint> endpoint_;
  std::unique_ptr<QuicConnection> conn_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer handshake_timer_;
  MonoTime armed_at_ = MonoTime::max();
  bool timer_armed_ = false;
  std::vector<std::string> cids_;  // routed to us at the endpoint
  Ready ready_;  // connect's callback, or the endpoint's accept hook
  std::string finish_reason_;  // overrides the connection's own failure text
  bool announced_ = false;
  bool finished_ = false;
  bool flushing_ = false;
  bool waiting_writable_ = false;
  bool shutting_ = false;
  Handler shutdown_done_;
  // Datagrams built but not yet taken by the socket (it said EAGAIN).
  Bytes tx_buf_;
  size_t tx_len_ = 0;
  size_t tx_segment_ = 0;
  udp::endpoint tx_to_;
  struct PendingWrite {
    uint64_t end;  // stream offset just past its bytes
    size_t size;
    IoHandler done;
  };
  std::deque<PendingWrite> writes_;
  uint8_t* read_buf_ = nullptr;
  size_t read_size_ = 0;
  IoHandler read_done_;
};

}  // namespace yonder::quic
