// Length-prefixed JSON messages (net/link/message.h) both ways over one
// TlsChannel: a read loop that feeds a ControlReader and hands each message
// to its owner, and a bounded write queue that coalesces what queued while a
// write was out. The relay server uses one per node connection, RelayClient
// one per relay. Event-loop thread only.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "net/link/tls_channel.h"
#include "relay/protocol.h"

namespace yonder::relay {

class ControlChannel : public std::enable_shared_from_this<ControlChannel> {
 public:
  using OnMessage = std::function<void(nlohmann::json)>;
  using OnClosed = std::function<void(const Error& why)>;
  // Unsent bytes beyond this close the channel: the other side does not read.
  static constexpr size_t kMaxQueuedBytes = 512 * 1024;

  explicit ControlChannel(std::shared_ptr<link::TlsChannel> tls);
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Starts reading. on_closed is called once, whatever closes the channel
  // (the other side, an error, or close() here); both handlers are dropped
  // after it, so they may hold their owner.
  void start(OnMessage on_message, OnClosed on_closed);
  // Queues one message. Returns false (and closes) when the queue is over its bound.
  bool send(const nlohmann::json& message);
  // Sends what is queued and a TLS close_notify, then closes (after at most
  // two seconds either way); on_closed gets `why`.
  void close_after_flush(Error why);
  // Closes the socket now.
  void close(Error why);
  bool closed() const { return closed_; }
  bool closing() const { return closing_.has_value() || closed_; }
  link::TlsChannel& tls() { return *tls_; }

 private:
  void read_next();
  void write_next();
  void finish(Error why);

  std::shared_ptr<link::TlsChannel> tls_;
  ControlReader reader_;
  std::array<uint8_t, ControlReader::kMaxFeedBytes> buf_{};
  Bytes queued_;
  bool writing_ = false;
  bool closed_ = false;
  std::optional<Error> closing_;
  std::unique_ptr<boost::asio::steady_timer> close_timer_;
  OnMessage on_message_;
  OnClosed on_closed_;
};

}  // namespace yonder::relay
