// A DatagramPort over its own Asio UDP socket: for tests and test tools
// (yonderd uses the QUIC carrier's socket). Every datagram received is handed
// to the receiver given to start(), on the io_context's thread.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <functional>
#include <memory>

#include "base/error.h"
#include "net/punch/datagram_port.h"

namespace yonder::punch {

class UdpDatagramPort final : public DatagramPort {
 public:
  using Receiver = std::function<void(const udp::endpoint& from, ByteView bytes)>;

  // Binds `local` (port 0 picks one). The socket is made in the calling
  // thread's network namespace.
  static Result<std::unique_ptr<UdpDatagramPort>> open(boost::asio::io_context& io, const udp::endpoint& local);
  ~UdpDatagramPort() override;
  UdpDatagramPort(const UdpDatagramPort&) = delete;
  UdpDatagramPort& operator=(const UdpDatagramPort&) = delete;

  // Starts receiving; `receiver` is called for each datagram until close().
  void start(Receiver receiver);
  void send_to(const udp::endpoint& to, ByteView bytes, std::optional<int> ttl) override;
  udp::endpoint local_endpoint() const;
  // Stops receiving and gives the socket away (open, bound, on the same
  // executor); the port is closed after. An error when it already is.
  Result<udp::socket> release();
  void close();

  struct State;

 private:
  explicit UdpDatagramPort(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace yonder::punch
