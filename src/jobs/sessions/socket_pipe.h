// One stream socket joined to a link tunnel stream, both ways: a TCP
// connection (the consumer's side of `yonder forward`, a local client's
// connection; the provider's side of a forward to one of its own ports,
// jobs/sessions/host_forward.h) or a unix one (remote CUDA's sessions,
// jobs/sessions/cuda_sessions.h).
//
// Reads from the socket wait until the tunnel took the last chunk (drained),
// and the tunnel is resumed only when the last chunk was written to the
// socket, so neither side buffers more than one chunk: the mux windows carry
// the back-pressure. A half-close travels both ways (EOF on the socket
// half-closes the tunnel, the tunnel's EOF shuts the socket's sending side);
// the pipe is done when both halves are, or when either side fails (a
// reset read from the socket counts as its EOF; bytes being written when the
// tunnel dies are written first).
//
// Threading: event loop only (the socket's and the tunnel's).
#pragma once

#include <array>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <functional>
#include <memory>
#include <string>

#include "net/link/link_service.h"

namespace yonder::jobs::sessions {

class SocketPipe : public std::enable_shared_from_this<SocketPipe> {
 public:
  static constexpr size_t kReadChunk = 256 * 1024;

  // `done` is called once, when the pipe is over (from inside one of its
  // callbacks: post anything that may destroy the pipe).
  SocketPipe(boost::asio::ip::tcp::socket socket, std::function<void(SocketPipe*)> done)
      : socket_(std::move(socket)), done_(std::move(done)) {}
  SocketPipe(boost::asio::local::stream_protocol::socket socket, std::function<void(SocketPipe*)> done)
      : socket_(std::move(socket)), done_(std::move(done)) {}

  void start(std::shared_ptr<link::Tunnel> tunnel);
  // Closes the connection at once (the forward is being stopped).
  void fail();
  // Sends `last` to the socket, then closes (a refusal it can show).
  void fail_with(std::string last);

  // Bytes carried so far: from the socket to the tunnel, and back.
  uint64_t bytes_from_socket() const { return from_socket_; }
  uint64_t bytes_to_socket() const { return to_socket_; }

 private:
  void read_socket();
  void write_socket(Bytes b);
  void maybe_done();

  boost::asio::generic::stream_protocol::socket socket_;
  std::function<void(SocketPipe*)> done_;
  std::shared_ptr<link::Tunnel> tunnel_;
  std::array<uint8_t, kReadChunk> buf_{};
  bool local_done_ = false, remote_done_ = false, finished_ = false;
  bool writing_ = false, fail_after_write_ = false;  // the tunnel ended while a write was out
  uint64_t from_socket_ = 0, to_socket_ = 0;
};

}  // namespace yonder::jobs::sessions
