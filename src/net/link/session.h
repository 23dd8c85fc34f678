// One authenticated carrier (a Channel: TLS over TCP, or QUIC) to a peer carrying a Mux (internal to net/link: the
// rest of the code uses LinkService). Owns the socket; runs on the event
// loop thread; every Mux call happens there.
//
// The read loop feeds received bytes to the Mux and hands its events to the
// observer; the write loop drains the Mux's output whenever flush() wakes it;
// a timer drives keepalive and dead-link detection.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "crypto/identity.h"
#include "net/link/mux.h"
#include "net/link/channel.h"
#include "net/link/tls_context.h"

namespace yonder::link {

class Session;

class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  // Called for every Mux event, in order, on the event loop.
  virtual void on_mux_event(const std::shared_ptr<Session>& session, MuxEvent event) = 0;
  // Called once when the session ends, for whatever reason.
  virtual void on_session_closed(const std::shared_ptr<Session>& session, const std::string& why) = 0;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Channel> stream, Role role, PublicKeyBytes peer, KeyVerdict verdict,
          SessionObserver* observer, std::string path, MuxConfig mux_config = {});
  ~Session();

  // Starts the read and write loops and the keepalive timer.
  void start();
  Mux& mux() { return mux_; }
  // Wakes the write loop after the application queued output in the Mux.
  void flush();
  // Tells the peer (GOAWAY with `reason`), sends what is queued, then closes.
  // The observer's on_session_closed follows.
  void close(const std::string& reason);
  // Closes the socket at once, sending nothing more (not even GOAWAY): for
  // dialers that must learn nothing about this node.
  void abort(const std::string& reason) { finish(reason); }
  // A better path to the peer is up: GOAWAY (kPathMoved) so neither side
  // opens streams here; streams running on it finish, then it closes.
  void drain(const std::string& reason);
  bool draining() const { return draining_ || closing_; }

  const PublicKeyBytes& peer() const { return peer_; }
  KeyVerdict verdict() const { return verdict_; }
  void set_verdict(KeyVerdict v) { verdict_ = v; }
  bool closed() const { return closed_; }
  // Established: a valid application message arrived from the peer.
  bool established() const { return established_; }
  void set_established() { established_ = true; }
  // Sends a ping now, so the session knows its round trip before the first
  // keepalive. Only once established: a dialer that has not paired reads
  // no byte from us.
  void measure_rtt();
  const std::string& path() const { return path_; }
  std::optional<std::chrono::nanoseconds> rtt() const { return rtt_; }
  void set_rtt(std::chrono::nanoseconds rtt) { rtt_ = rtt; }
  std::string short_auth_string();
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }

 private:
  void read_some();
  void write_some();
  void arm_timer(MonoTime deadline);
  void drain_events();
  void finish(const std::string& why);

  std::shared_ptr<Channel> stream_;
  Mux mux_;
  PublicKeyBytes peer_;
  KeyVerdict verdict_;
  SessionObserver* observer_;
  std::string path_;
  boost::asio::steady_timer timer_;
  std::array<uint8_t, 64 * 1024> read_buf_{};
  Bytes write_buf_;
  bool writing_ = false;
  bool closing_ = false;
  bool draining_ = false;
  bool in_events_ = false;  // inside drain_events: a drained session closes only after
  bool closed_ = false;
  bool established_ = false;
  std::string close_reason_;
  std::optional<std::chrono::nanoseconds> rtt_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
};

}  // namespace yonder::link
