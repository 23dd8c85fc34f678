// A node's connection to one relay (protocol.h): register with the node's
// key, learn the observed public address and NAT verdict, exchange small
// signals with mutually declared peers, and open byte pipes to them.
//
// Typical use (all on one io_context thread):
//
//   auto client = RelayClient::create(io, identity, {.address = "relay.example:7851",
//                                                   .relay_key = pinned, .peers = paired}).value();
//   client->connect(handlers, [](Result<Registration> r) { ... r->nat.observed ... });
//   client->open_pipe(peer, [](Result<RelayPipe> p) {
//     // p->socket is a connected TCP socket whose bytes reach the peer's
//     // pipe end unchanged: run the end-to-end TLS session on it
//     // (link::TlsChannel(std::move(p->socket), ctx, /*server=*/!p->initiator)).
//   });
//   handlers.pipe_wanted = [&](const PublicKeyBytes& from) { client->open_pipe(from, ...); };
//
// The client does not reconnect by itself: when `closed` fires, its owner
// redials (with backoff) and re-registers; the relay keeps no state across
// connections. It pings every `keepalive` so the relay's idle timeout never
// fires, and closes itself when a ping goes unanswered for a whole interval.
//
// Threading: create, call and destroy on the io_context's thread; every
// callback runs there. Each callback is called exactly once (requests pending
// when the connection ends get its error).
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "crypto/identity.h"
#include "relay/protocol.h"

namespace boost::asio {
class io_context;
}

namespace yonder::relay {

struct RelayClientConfig {
  std::string address;                                // "host:port" or "[v6]:port" of the relay; a name is resolved
  std::optional<PublicKeyBytes> relay_key;            // pin the relay's key (recommended); unset accepts any relay
  // Where relay_key came from, so that the error for a relay proving another
  // key tells the user what to do: this node's settings, or the share link
  // of a provider (whose relay it then is not).
  bool relay_key_from_share_link = false;
  std::vector<PublicKeyBytes> peers;                  // the nodes this node is paired with
  std::vector<Rendezvous> rendezvous;                 // tokens of our open share links (protocol.h)
  std::chrono::milliseconds connect_timeout{10'000};  // TCP + TLS + registration
  std::chrono::milliseconds keepalive{25'000};        // ping interval; 0 sends none
  std::chrono::milliseconds pipe_connect_timeout{10'000};  // extra time for a pipe end beyond the ticket's
};

struct Registration {
  PublicKeyBytes relay_key{};  // the key the relay's TLS certificate proved
  NatReport nat;               // observed address, this connection's mapping, the node's NAT verdict
  uint64_t node_rate = 0;      // bytes/s this node may send through pipes (0: no limit)
  uint32_t max_signal_bytes = 0;
  std::chrono::milliseconds idle_timeout{0};
};

// One end of a joined pipe. `socket` carries raw bytes to and from the peer.
struct RelayPipe {
  boost::asio::ip::tcp::socket socket;
  PublicKeyBytes peer{};
  bool initiator = false;  // our request came first: by convention the inner TLS client
};

class RelayClient : public std::enable_shared_from_this<RelayClient> {
 public:
  struct Handlers {
    // `from_host`: the sender's IP as the relay saw it ("" from an older relay).
    std::function<void(const PublicKeyBytes& from, Bytes data, const std::string& from_host)> signal;
    // `from` asked for a pipe to us: call open_pipe(from, ...) to accept
    // (within the relay's pipe request timeout), or ignore it.
    std::function<void(const PublicKeyBytes& from)> pipe_wanted;
    // A node that holds one of our share links wants a pipe to pair: accept
    // with open_pipe(from, token, ...) if the token is still ours.
    std::function<void(const PublicKeyBytes& from, const Rendezvous& token)> pairing_pipe_wanted;
    // Another registration of our key (probe_nat) changed the NAT verdict.
    std::function<void(const NatReport&)> nat;
    // The registered connection ended (not called after close()).
    std::function<void(const Error&)> closed;
  };

  static Result<std::shared_ptr<RelayClient>> create(boost::asio::io_context& io, const Identity& identity,
                                                     RelayClientConfig config);
  ~RelayClient();

  // Connects, proves our key, registers with our peers. Once.
  void connect(Handlers handlers, std::function<void(Result<Registration>)> done);
  // Replaces the declared peers (after pairing or deny).
  void set_peers(std::vector<PublicKeyBytes> peers, std::function<void(Status)> done);
  // Replaces both the declared peers and the rendezvous tokens.
  void set_peers(std::vector<PublicKeyBytes> peers, std::vector<Rendezvous> rendezvous,
                 std::function<void(Status)> done);
  // At most Registration::max_signal_bytes of opaque bytes to a mutual peer.
  void send_signal(const PublicKeyBytes& to, Bytes data, std::function<void(Status)> done);
  // Asks for a pipe to `to`; completes when both ends are joined, or with
  // the relay's refusal (not_declared, peer_unavailable, pipe_timeout, ...).
  void open_pipe(const PublicKeyBytes& to, std::function<void(Result<RelayPipe>)> done);
  // The same for pairing: `to` has not declared us, but registered `token`.
  void open_pipe(const PublicKeyBytes& to, const Rendezvous& token, std::function<void(Result<RelayPipe>)> done);
  // Registers a second time from a new local socket, only to sample the NAT
  // (nat.h); returns the verdict over both registrations.
  void probe_nat(std::function<void(Result<NatReport>)> done);
  // Closes the connection; pending callbacks get an error.
  void close();

  bool registered() const { return registration_.has_value() && !closed_; }
  const std::optional<Registration>& registration() const { return registration_; }

  struct State;

 private:
  RelayClient(boost::asio::io_context& io, const Identity& identity, RelayClientConfig config);
  void on_message(nlohmann::json j);
  void on_closed(const Error& why);
  // Sends a request; `reply` gets the relay's answer with the same id (an
  // error{} becomes an Error) or the connection's end.
  void request(ClientMessage m, uint64_t id, std::function<void(Result<RelayMessage>)> reply);
  uint64_t next_request_id();
  void arm_keepalive();
  void join_pipe(const PipeReady& ready, std::function<void(Result<RelayPipe>)> done);
  void open_pipe_impl(const PublicKeyBytes& to, std::optional<Rendezvous> token,
                      std::function<void(Result<RelayPipe>)> done);

  std::unique_ptr<State> state_;
  std::optional<Registration> registration_;
  bool closed_ = false;
};

}  // namespace yonder::relay
