// LinkService's internals, shared by link_service.cpp (connections, pairing)
// and link_streams.cpp (requests and byte streams). Not for other folders.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <set>

#include "net/link/link_service.h"
#include "net/link/message.h"
#include "net/link/session.h"
#include "net/link/tls_channel.h"

namespace yonder::link {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct TunnelState;  // link_tunnel.cpp

// Per stream, what this side is doing with it.
struct StreamState {
  uint16_t kind = 0;
  bool local = false;  // we opened it
  MessageReader reader;
  Bytes out;  // bytes waiting for credit
  bool close_after_out = false;
  // Caller side of an RPC.
  std::function<void(Result<nlohmann::json>)> on_reply;
  // Sends the same request again (on the best session then): for a request
  // the peer refused unhandled because the link moved to a better path.
  std::function<void()> resend;
  // Discard (acceptor): bytes counted.
  uint64_t counted = 0;
  // Generic callbacks for client-side streams (ping, speed test).
  std::function<void(StreamState&, ByteView)> on_data;
  std::function<void(const std::string&)> on_end;  // reset or session loss
  std::function<void()> on_remote_close;
  std::function<void()> on_writable;
  // Tunnel (either side, link_tunnel.cpp): set for kTunnel streams.
  std::shared_ptr<TunnelState> tunnel;
};

struct Conn {
  std::shared_ptr<Session> session;
  MessageReader control;
  std::map<uint32_t, StreamState> streams;
  bool dialed = false;
  // Dialer: callbacks waiting for the session to be established.
  std::vector<std::function<void(Status)>> waiters;
  std::function<void(Result<PairResult>)> pair_done;
  std::unique_ptr<asio::steady_timer> establish_timer;
  // Rate limit (acceptor side).
  double tokens = 0;
  Clock::time_point refilled{};
};

struct LinkService::Impl : SessionObserver {
  Impl(asio::io_context& io, const Identity& identity, TrustPolicy& policy, LinkConfig config);

  asio::io_context& io;
  PublicKeyBytes self_key;
  TrustPolicy& policy;
  LinkConfig config;
  std::shared_ptr<TlsContext> server_tls;
  std::shared_ptr<TlsContext> client_tls;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
  std::map<Session*, Conn> conns;
  std::map<std::string, RpcHandler> methods;
  std::map<std::string, TunnelHandler> tunnel_methods;
  struct Keep {
    std::vector<std::string> addresses;
    int failures = 0;
    std::unique_ptr<asio::steady_timer> timer;
    bool dialing = false;
  };
  std::map<PublicKeyBytes, Keep> keep;
  CarrierDialer carrier_dialer;
  std::function<void(const PublicKeyBytes&, const std::string&)> established_hook;
  std::chrono::milliseconds carrier_head_start{500};
  std::set<std::pair<PublicKeyBytes, std::string>> trying;  // try_path dials in flight
  // Handshake outcomes by (path kind, outcome): LinkService::handshakes().
  std::map<std::pair<std::string, std::string>, uint64_t> handshake_counts;
  void count_handshake(const std::string& path, const char* outcome) {
    ++handshake_counts[{path.substr(0, path.find(' ')), outcome}];
  }
  void redial(const PublicKeyBytes& peer);
  void schedule_redial(const PublicKeyBytes& peer);
  bool stopped = false;

  // link_service.cpp
  void accept_next();
  void on_accepted(asio::ip::tcp::socket socket);
  using PairDone = std::shared_ptr<std::function<void(Result<PairResult>)>>;
  void dial(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, std::optional<ShareLink> pairing,
            PairDone pair_done, std::function<void(Status)> established);
  void dial_address(const PublicKeyBytes& peer, std::vector<std::string> addresses, size_t index,
                    std::optional<ShareLink> pairing, PairDone pair_done, std::string last_error,
                    std::function<void(Status)> done, std::string path_kind = "direct");
  void dial_carrier(const PublicKeyBytes& peer, std::optional<ShareLink> pairing, PairDone pair_done,
                    std::function<void(Status)> done);
  // The TLS client's side on a connected socket (a dialled address or a
  // carrier); `timer` bounds the handshake and is cancelled here.
  void start_dialer(asio::ip::tcp::socket socket, const PublicKeyBytes& peer, std::optional<ShareLink> pairing,
                    PairDone pair_done, std::function<void(Status)> done, std::string path, std::string label,
                    std::shared_ptr<asio::steady_timer> timer);
  // The acceptor's side; `expect` (a carrier) must be the key that answers;
  // `waiter` is told when the session is established.
  void start_acceptor(asio::ip::tcp::socket socket, std::string path, std::optional<PublicKeyBytes> expect,
                      std::function<void(Status)> waiter);
  void drain_worse(Conn& established);
  Conn* find_established(const PublicKeyBytes& peer);
  Conn* conn_of(const std::shared_ptr<Session>& s);
  void with_session(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                    std::function<void(Result<Conn*>)> use);
  void on_control_message(Conn& c, nlohmann::json msg);
  void mark_established(Conn& c);
  void on_mux_event(const std::shared_ptr<Session>& session, MuxEvent event) override;
  void on_session_closed(const std::shared_ptr<Session>& session, const std::string& why) override;
  void send_control(Conn& c, const nlohmann::json& msg);
  MuxConfig mux_config() const {
    MuxConfig m;
    m.dead_after = std::chrono::duration_cast<decltype(m.dead_after)>(config.dead_after);
    m.keepalive_interval = m.dead_after / 3;
    return m;
  }

  // link_streams.cpp
  void on_stream_opened(Conn& c, uint32_t id, uint16_t kind);
  void on_stream_data(Conn& c, uint32_t id);
  void on_stream_closed(Conn& c, uint32_t id);
  // `refused`: the peer did not handle the stream (GOAWAY): a request may be
  // sent again, on another session.
  void on_stream_reset(Conn& c, uint32_t id, const std::string& reason, bool refused = false);
  void on_stream_writable(Conn& c, uint32_t id);
  void send(Conn& c, uint32_t id, ByteView data, bool close_after);
  void handle_rpc(Conn& c, uint32_t id, const nlohmann::json& request);
  bool take_token(Conn& c);
  Clock::time_point steady_now() const { return config.budget_clock ? config.budget_clock->steady_now() : Clock::now(); }
  Result<uint32_t> open(Conn& c, AppStreamKind kind);


  // link_tunnel.cpp
  struct TunnelEnd;
  void on_tunnel_opened(Conn& c, uint32_t id);
  void on_tunnel_data(Conn& c, uint32_t id);
  void on_tunnel_closed(Conn& c, uint32_t id);
};

}  // namespace yonder::link
