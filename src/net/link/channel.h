// The byte carrier a Session runs its Mux over: an authenticated, encrypted,
// ordered, reliable two-way byte stream. Two kinds exist:
//   TlsChannel   TLS 1.3 over a TCP socket (direct, LAN, mapped and relay
//                paths; OpenSSL; tls_channel.h);
//   QuicChannel  one bidirectional stream of a QUIC connection over UDP
//                (punched paths; ngtcp2 + GnuTLS; net/quic).
// A Session sees only this interface, so jobs, logs, files and forwards run
// unchanged on either carrier.
//
// Event-loop thread only. At most one read and one write outstanding.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/bytes.h"

namespace yonder::link {

class Channel {
 public:
  using Handler = std::function<void(boost::system::error_code)>;
  using IoHandler = std::function<void(boost::system::error_code, size_t)>;

  virtual ~Channel() = default;

  virtual boost::asio::any_io_executor get_executor() = 0;
  // Completes with 1..size plaintext bytes, or an error (asio eof once the
  // peer closed the session).
  virtual void async_read_some(uint8_t* buffer, size_t size, IoHandler done) = 0;
  // Takes all of `data` now; completes once it is on its way (handed to the
  // socket or the transport's send buffer).
  virtual void async_write(ByteView data, IoHandler done) = 0;
  // Orderly end (close_notify / QUIC CONNECTION_CLOSE), then closes.
  virtual void async_shutdown(Handler done) = 0;
  // Closes at once; pending handlers are dropped.
  virtual void close() = 0;
  // RFC 8446 7.5 / RFC 5705 exporter over the session's secrets: both ends
  // get the same bytes for the same label. False if unavailable.
  virtual bool export_keying_material(std::string_view label, uint8_t* out, size_t size) = 0;
};

// Three groups of three digits both people can read out to each other to
// check that no one sits in the middle ("123 456 789"), from the session's
// exporter; "unavailable" if the channel cannot export.
std::string short_auth_string(Channel& channel);

}  // namespace yonder::link
