// TLS over a TCP socket with OpenSSL driven through BIOs of our own, so that
// ciphertext moves in large batches and is not copied on its way: one
// SSL_write of a 256 KiB plaintext chunk seals its records straight into the
// buffer the next socket write sends, and one socket read lands in the buffer
// SSL_read takes records from. Boost.Asio's ssl::stream writes one ~16 KiB
// record per system call, which on loopback cost half the link's throughput;
// OpenSSL's memory BIOs cost a copy of every ciphertext byte each way
// (bench/link_bench.cpp measures both ends).
//
// Event-loop thread only. Reads and writes may be outstanding at the same
// time (one of each); all ciphertext leaves through one output pump, so
// records produced by SSL_read (key updates, alerts) and by SSL_write never
// interleave on the socket.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "base/bytes.h"
#include "net/link/channel.h"

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;
using BIO = struct bio_st;

namespace yonder::link {

class TlsChannel final : public Channel, public std::enable_shared_from_this<TlsChannel> {
 public:

  TlsChannel(boost::asio::ip::tcp::socket socket, SSL_CTX* ctx, bool server);
  ~TlsChannel() override;
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  SSL* native_handle() const { return ssl_; }
  boost::asio::ip::tcp::socket& socket() { return socket_; }

  boost::asio::any_io_executor get_executor() override { return socket_.get_executor(); }
  bool export_keying_material(std::string_view label, uint8_t* out, size_t size) override;

  void async_handshake(Handler done);
  // Completes with 1..buffer.size() plaintext bytes, or an error (asio eof
  // once the peer closed the TLS session or the socket).
  void async_read_some(uint8_t* buffer, size_t size, IoHandler done) override;
  // Encrypts all of `data` now; completes once its records reached the socket.
  void async_write(ByteView data, IoHandler done) override;
  // Sends close_notify, then closes the socket.
  void async_shutdown(Handler done) override;
  void close() override;

 private:
  void handshake_step();
  void pump();
  void fill(std::function<void(boost::system::error_code)> then);
  void finish_read();
  boost::system::error_code ssl_error(const char* what);

  boost::asio::ip::tcp::socket socket_;
  SSL* ssl_;
  friend struct ChannelBio;
  BIO* in_;   // OpenSSL reads ciphertext from rx_ through it
  BIO* out_;  // OpenSSL appends ciphertext to sealed_ through it
  std::vector<uint8_t> rx_;  // what the last socket read brought
  size_t rx_begin_ = 0;      // rx_[rx_begin_, rx_end_) is not yet taken by OpenSSL
  size_t rx_end_ = 0;
  Bytes sealed_;  // ciphertext waiting for the socket
  Bytes tx_;      // ciphertext on its way to the socket (swapped with sealed_)
  bool writing_ = false;
  bool reading_ = false;
  bool socket_eof_ = false;
  std::vector<Handler> drained_;  // called when all ciphertext so far is on the socket
  Handler handshake_done_;
  uint8_t* read_buf_ = nullptr;
  size_t read_size_ = 0;
  IoHandler read_done_;
};

}  // namespace yonder::link
