// Internals of the relay server (server.h), shared by server.cpp,
// node_conn.cpp, pipe.cpp and metrics_http.cpp. Everything here runs on the
// server's one event-loop thread.
//
// Ownership: Impl holds every live connection and pipe in its maps; each of
// them holds Impl (shared) so that a completion handler never outlives what
// it touches. The cycles end when a connection or pipe closes and leaves the
// maps; stop() closes all of them.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "os/kernel_pipe.h"
#include "relay/control_channel.h"
#include "relay/server.h"
#include "relay/token_bucket.h"

namespace yonder::relay {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class NodeConn;
class Pipe;
class MetricsHttp;
class StunResponder;

// One open TCP connection, counted against RelayConfig::max_connections
// for as long as this lives.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(std::shared_ptr<size_t> count) : count_(std::move(count)) { ++*count_; }
  ConnectionSlot(ConnectionSlot&& o) noexcept : count_(std::move(o.count_)) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ~ConnectionSlot() {
    if (count_) --*count_;
  }

 private:
  std::shared_ptr<size_t> count_;
};

// One connection of a node, counted against its per-node limit in the
// registry for as long as this lives.
class NodeSlot {
 public:
  NodeSlot(std::weak_ptr<RelayServer::Impl> server, PublicKeyBytes node, Registry::Slot slot = Registry::Slot::kControl)
      : server_(std::move(server)), node_(node), slot_(slot) {}
  NodeSlot(NodeSlot&& o) noexcept : server_(std::move(o.server_)), node_(o.node_), slot_(o.slot_) {
    o.server_.reset();
  }
  NodeSlot& operator=(NodeSlot&&) = delete;
  ~NodeSlot();
  const PublicKeyBytes& node() const { return node_; }

 private:
  std::weak_ptr<RelayServer::Impl> server_;
  PublicKeyBytes node_;
  Registry::Slot slot_;
};

// A node's bandwidth budget, shared by all its pipes (charged for what it sends).
struct NodeBudget {
  TokenBucket bucket;
};

// A connection whose first byte (TLS or pipe preface) has not arrived yet, or
// a pipe end reading its preface.
struct Incoming {
  Incoming(tcp::socket s, ConnectionSlot slot_in)
      : socket(std::move(s)), timer(socket.get_executor()), slot(std::move(slot_in)) {}
  tcp::socket socket;
  asio::steady_timer timer;
  ConnectionSlot slot;
  std::array<uint8_t, kPipePrefaceBytes> preface{};
};

struct RelayServer::Impl : std::enable_shared_from_this<RelayServer::Impl> {
  Impl(asio::io_context& io, const Identity& identity, RelayConfig config);

  void accept_next();
  void on_accepted(tcp::socket socket);
  void classify(uint64_t incoming_id);
  void read_preface(uint64_t incoming_id);
  void on_preface(uint64_t incoming_id);
  void refuse_pipe_end(std::shared_ptr<Incoming> in, PipeStatus status);

  // Called by NodeConn and Pipe.
  void conn_closed(ConnId id);
  void pipe_closed(PipeId id);
  void send_to(ConnId id, const RelayMessage& m);
  void rearm_housekeeping();
  void housekeep();
  std::shared_ptr<NodeBudget> budget_for(const PublicKeyBytes& node);
  double rate_for(const PublicKeyBytes& node) const;
  Gauges gauges() const;
  void stop();
  // After stop(): closes what is still open at once (RelayServer's destructor).
  void abort_all();

  asio::io_context& io;
  std::shared_ptr<link::TlsContext> tls;
  PublicKeyBytes self_key;
  RelayConfig config;
  Registry registry;
  Metrics metrics;
  Tap tap;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::shared_ptr<MetricsHttp> metrics_http;
  std::shared_ptr<StunResponder> stun;
  asio::steady_timer housekeeping;
  std::optional<MonoTime> housekeeping_at;
  MonoTime last_sweep;
  std::map<uint64_t, std::shared_ptr<Incoming>> incoming;
  std::map<ConnId, std::shared_ptr<NodeConn>> conns;
  std::map<PipeId, std::shared_ptr<Pipe>> pipes;
  std::map<PublicKeyBytes, std::shared_ptr<NodeBudget>> budgets;
  TokenBucket total_budget;  // all pipes together (config.total_rate)
  MonthlyAllowance allowance;
  uint64_t unreported = 0;  // bytes charged since on_monthly_usage last heard
  // Charges `n` bytes a pipe carried to the month; at the cap, closes every
  // pipe. False once the cap is reached (the caller's pipe is closed too).
  bool charge_month(uint64_t n);
  // Refuses a new pipe when the month's cap is reached (nothing otherwise).
  std::optional<Refusal> monthly_refusal() const;
  void report_usage();
  std::shared_ptr<size_t> open_connections = std::make_shared<size_t>(0);
  uint64_t next_id = 1;
  bool stopped = false;
};

// A node's control connection: TLS handshake, registration, then requests.
class NodeConn : public std::enable_shared_from_this<NodeConn> {
 public:
  NodeConn(std::shared_ptr<RelayServer::Impl> server, ConnId id, tcp::socket socket, ConnectionSlot slot);
  void start();
  void send(const RelayMessage& m);
  // Sends error{reason} (no id: the connection ends) and closes after it.
  void close(Reason reason, const std::string& message);
  // Closes at once, without flushing: for a server going away while the
  // loop may not run again (the channel's handlers hold this connection,
  // and it holds the server, until the channel finishes).
  void abort(const std::string& why);
  ConnId id() const { return id_; }

 private:
  void on_handshake(boost::system::error_code ec);
  void on_message(const nlohmann::json& j);
  void on_closed(const Error& why);
  void handle(const Register& m);
  void handle(const SetPeers& m);
  void handle(const SendSignal& m);
  void handle(const RequestPipe& m);
  void handle(const Ping& m);
  bool spend_message_token(uint64_t request_id);
  void refuse(uint64_t request_id, const Refusal& r);
  void arm_idle();

  std::shared_ptr<RelayServer::Impl> server_;
  ConnId id_;
  NetAddress observed_;
  std::shared_ptr<link::TlsChannel> tls_;
  std::shared_ptr<ControlChannel> chan_;
  std::optional<ConnectionSlot> slot_;  // released at close, not when the last handler lets go
  std::optional<NodeSlot> node_slot_;
  std::optional<PublicKeyBytes> key_;
  asio::steady_timer timer_;  // handshake + register, then idle
  MonoTime last_heard_;
  TokenBucket messages_;
  bool registered_ = false;
  bool closed_ = false;
};

// Two ends of a pipe: waits for both tickets, then copies bytes both ways,
// each direction paced by its sending node's budget.
class Pipe : public std::enable_shared_from_this<Pipe> {
 public:
  Pipe(std::shared_ptr<RelayServer::Impl> server, PipeId id, std::array<PublicKeyBytes, 2> nodes);
  void attach(int side, tcp::socket socket, ConnectionSlot slot, NodeSlot node_slot);
  // Ends the pipe: ends still waiting to be joined get `status`, joined ones are closed.
  void close(PipeStatus status, const char* why);

 private:
  struct End {
    std::optional<tcp::socket> socket;
    std::optional<ConnectionSlot> slot;
    std::optional<NodeSlot> node_slot;
    std::shared_ptr<NodeBudget> budget;
    std::vector<uint8_t> buf;                   // copy mode
    std::optional<os::KernelPipe> kernel_pipe;  // splice mode
    std::unique_ptr<asio::steady_timer> throttle;
    bool eof = false;        // this end sent its last byte (splice mode: maybe still in the kernel pipe)
    bool read_done = false;  // ... and it was passed on
    uint64_t bytes = 0;      // sent by this end's node
  };
  void join();
  void pump(int from);
  void pump_copy(int from);
  void pump_splice(int from);
  // How many bytes `from` may send now, or nothing (then a timer calls pump).
  std::optional<uint64_t> budget(int from, uint64_t want);
  void finish_direction(int from);
  void arm_idle();

  std::shared_ptr<RelayServer::Impl> server_;
  PipeId id_;
  std::array<PublicKeyBytes, 2> nodes_;
  std::array<End, 2> ends_;
  asio::steady_timer idle_;
  MonoTime last_activity_;
  int status_writes_ = 0;
  bool splice_ = false;  // zero-copy unless a tap must see the bytes
  bool joined_ = false;
  bool closed_ = false;
};

// GET /metrics over HTTP/1.1 (Boost.Beast), one request per connection.
class MetricsHttp : public std::enable_shared_from_this<MetricsHttp> {
 public:
  MetricsHttp(asio::io_context& io, std::function<std::string()> render);
  Status listen(const std::string& host_port);
  tcp::endpoint endpoint() const;
  void stop();

 private:
  void accept_next();
  asio::io_context& io_;
  tcp::acceptor acceptor_;
  std::function<std::string()> render_;
};

// "ip:port" as a TCP endpoint (numeric addresses only).
Result<tcp::endpoint> parse_listen_address(const std::string& text, const char* what);

}  // namespace yonder::relay
