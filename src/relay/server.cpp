#include "relay/server.h"

#include <openssl/rand.h>

#include <spdlog/spdlog.h>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "relay/server_impl.h"
#include "relay/stun_responder.h"

namespace yonder::relay {
namespace {

Ticket random_ticket() {
  Ticket t{};
  if (RAND_bytes(t.data(), static_cast<int>(t.size())) != 1) std::abort();  // no randomness: nothing is safe
  return t;
}

// How often budgets of nodes without pipes are forgotten (once full again: TokenBucket::full).
constexpr std::chrono::seconds kSweepEvery{60};

}  // namespace

NodeSlot::~NodeSlot() {
  if (auto s = server_.lock()) s->registry.release(node_, slot_);
}

Result<tcp::endpoint> parse_listen_address(const std::string& text, const char* what) {
  auto a = parse_net_address(text);
  if (!a) {
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " must be IP:PORT (port 0 picks one), not \"" + text.substr(0, 80) + "\"");
  }
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(a->ip, ec);
  if (ec) return Error(ErrorCode::kInvalidArgument, std::string(what) + ": bad IP address " + a->ip);
  return tcp::endpoint(ip, a->port);
}

RelayServer::Impl::Impl(asio::io_context& io_ctx, const Identity& identity, RelayConfig c)
    : io(io_ctx),
      tls(link::TlsContext::create(identity, true).value()),
      self_key(identity.public_key()),
      config(std::move(c)),
      registry(config.registry, random_ticket),
      housekeeping(io_ctx),
      last_sweep(std::chrono::steady_clock::now()),
      total_budget(config.total_rate, config.total_burst, last_sweep),
      allowance(config.monthly_bytes, config.monthly_usage) {
  registry.set_hosts(config.hosts_node);
}

namespace {
std::string this_month() { return utc_month(std::chrono::system_clock::now()); }
}  // namespace

void RelayServer::Impl::report_usage() {
  unreported = 0;
  if (config.on_monthly_usage) config.on_monthly_usage(allowance.usage());
}

bool RelayServer::Impl::charge_month(uint64_t n) {
  // Nothing to enforce or report (a yonder-relay): no clock read and no
  // string per chunk on the copy path.
  if (allowance.cap() == 0 && !config.on_monthly_usage) return true;
  const std::string month = this_month();
  const bool was_open = allowance.open(month);
  allowance.charge(n, month);
  unreported += n;
  if (allowance.open(month)) {
    if (unreported >= kMonthlyUsageReport) report_usage();
    return true;
  }
  if (was_open) {
    spdlog::warn("relay: carried its monthly allowance ({} bytes in {}); closing its {} pipe(s) and taking no new "
                 "ones until the month turns (UTC)",
                 allowance.cap(), month, pipes.size());
    report_usage();
    auto all = pipes;  // close() removes each from `pipes`
    for (auto& [id, pipe] : all) pipe->close(PipeStatus::kRefused, "the relay's monthly allowance is used up");
  }
  return false;
}

std::optional<Refusal> RelayServer::Impl::monthly_refusal() const {
  if (allowance.cap() == 0) return std::nullopt;
  const std::string month = this_month();
  if (allowance.open(month)) return std::nullopt;
  return Refusal{Reason::kMonthlyCapReached,
                 "this relay has carried its monthly allowance (" + std::to_string(allowance.cap()) + " bytes in " +
                     month + "); it takes pipes again when the month turns (UTC), or when its operator raises "
                             "the cap; meanwhile use another relay or a direct path"};
}

RelayServer::RelayServer(asio::io_context& io, const Identity& identity, RelayConfig config)
    : impl_(std::make_shared<Impl>(io, identity, std::move(config))) {}

RelayServer::~RelayServer() {
  stop();
  impl_->abort_all();
}

Status RelayServer::listen(const std::string& host_port) {
  auto ep = parse_listen_address(host_port, "--listen");
  if (!ep) return std::move(ep).error();
  std::unique_ptr<tcp::acceptor> acc;
  // With port 0 the kernel picks the TCP port, which may be taken on UDP:
  // try a few pairs before giving up.
  for (int tries = ep->port() == 0 && impl_->config.stun ? 8 : 1; tries > 0; --tries) {
    acc = std::make_unique<tcp::acceptor>(impl_->io);
    boost::system::error_code ec;
    acc->open(ep->protocol(), ec);
    if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acc->bind(*ep, ec);
    if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return make_error(ErrorCode::kUnavailable, "cannot listen for nodes on " + host_port + ": " + ec.message() +
                                                     "; choose a free address with --listen (port 0 picks one)");
    }
    if (!impl_->config.stun) break;
    auto stun = std::make_shared<StunResponder>(impl_->io, impl_->metrics, impl_->config.stun_rate,
                                                impl_->config.stun_burst);
    auto bound = acc->local_endpoint(ec);
    auto st = stun->open(asio::ip::udp::endpoint(bound.address(), bound.port()));
    if (st) {
      impl_->stun = std::move(stun);
      break;
    }
    if (tries == 1) {
      return make_error(ErrorCode::kUnavailable,
                        st.error().message() + "; the relay answers STUN on the UDP port with the number of its "
                                               "TCP port: free that UDP port or choose another --listen port");
    }
  }
  impl_->acceptor = std::move(acc);
  impl_->accept_next();
  impl_->rearm_housekeeping();
  return ok_status();
}

Status RelayServer::listen_metrics(const std::string& host_port) {
  std::weak_ptr<Impl> weak = impl_;
  auto http = std::make_shared<MetricsHttp>(impl_->io, [weak] {
    auto s = weak.lock();
    return s ? render_prometheus(s->metrics, s->gauges()) : std::string();
  });
  YONDER_TRY(http->listen(host_port));
  impl_->metrics_http = std::move(http);
  return ok_status();
}

tcp::endpoint RelayServer::local_endpoint() const {
  boost::system::error_code ec;
  return impl_->acceptor ? impl_->acceptor->local_endpoint(ec) : tcp::endpoint();
}

std::optional<asio::ip::udp::endpoint> RelayServer::stun_endpoint() const {
  if (!impl_->stun) return std::nullopt;
  return impl_->stun->local_endpoint();
}

tcp::endpoint RelayServer::metrics_endpoint() const {
  return impl_->metrics_http ? impl_->metrics_http->endpoint() : tcp::endpoint();
}

const PublicKeyBytes& RelayServer::key() const {
  return impl_->self_key;
}
void RelayServer::stop() {
  impl_->stop();
}
void RelayServer::set_tap(Tap tap) {
  impl_->tap = std::move(tap);
}
const Metrics& RelayServer::metrics() const {
  return impl_->metrics;
}
Gauges RelayServer::gauges() const {
  return impl_->gauges();
}
MonthlyUsage RelayServer::monthly_usage() const {
  return impl_->allowance.usage();
}
std::string RelayServer::metrics_text() const {
  return render_prometheus(impl_->metrics, impl_->gauges());
}

Gauges RelayServer::Impl::gauges() const {
  Gauges g;
  g.connections = *open_connections;
  g.nodes = registry.node_count();
  g.registrations = registry.registration_count();
  g.pipes = registry.pipe_count();
  g.pending_pipe_requests = registry.pending_requests();
  return g;
}

void RelayServer::Impl::accept_next() {
  auto self = shared_from_this();
  acceptor->async_accept([this, self](boost::system::error_code ec, tcp::socket socket) {
    if (stopped) return;
    if (!ec) on_accepted(std::move(socket));
    accept_next();
  });
}

void RelayServer::Impl::on_accepted(tcp::socket socket) {
  ++metrics.connections_total;
  if (*open_connections >= config.max_connections) {
    // Nothing is known about the other side yet: close without a word.
    metrics.refused(Reason::kTooManyConnections);
    spdlog::warn("relay: refusing a connection: {} open, the limit (--max-connections)", *open_connections);
    return;
  }
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  uint64_t id = next_id++;
  auto in = std::make_shared<Incoming>(std::move(socket), ConnectionSlot(open_connections));
  incoming[id] = in;
  // One deadline for the first byte, then the TLS handshake and register (or
  // the pipe preface): a connection that stalls is dropped.
  in->timer.expires_after(config.handshake_timeout);
  std::weak_ptr<Incoming> weak = in;
  in->timer.async_wait([weak](boost::system::error_code ec) {
    auto i = weak.lock();
    if (!ec && i) {
      boost::system::error_code e;
      i->socket.close(e);
    }
  });
  classify(id);
}

// The first byte says what the connection is: 0x16 starts a TLS handshake
// (a node's control connection), 'Y' a pipe preface. Peeked, not read, so
// TLS sees its whole record.
void RelayServer::Impl::classify(uint64_t id) {
  auto in = incoming.at(id);
  auto self = shared_from_this();
  in->socket.async_wait(tcp::socket::wait_read, [this, self, id, in](boost::system::error_code ec) {
    if (stopped || incoming.count(id) == 0) return;
    uint8_t first = 0;
    size_t n = ec ? 0 : in->socket.receive(asio::buffer(&first, 1), tcp::socket::message_peek, ec);
    if (ec || n == 0) {
      incoming.erase(id);  // closed before saying anything, or timed out
      return;
    }
    if (first == kTlsHandshakeRecord) {
      in->timer.cancel();
      incoming.erase(id);
      ConnId conn_id = next_id++;
      auto conn = std::make_shared<NodeConn>(self, conn_id, std::move(in->socket), std::move(in->slot));
      conns[conn_id] = conn;
      conn->start();
      return;
    }
    if (first == kPipeMagic[0]) {
      read_preface(id);
      return;
    }
    metrics.refused(Reason::kBadMessage);
    incoming.erase(id);
  });
}

void RelayServer::Impl::read_preface(uint64_t id) {
  auto in = incoming.at(id);
  auto self = shared_from_this();
  asio::async_read(in->socket, asio::buffer(in->preface), [this, self, id](boost::system::error_code ec, size_t) {
    if (stopped || incoming.count(id) == 0) return;
    if (ec) {
      incoming.erase(id);
      return;
    }
    on_preface(id);
  });
}

void RelayServer::Impl::refuse_pipe_end(std::shared_ptr<Incoming> in, PipeStatus status) {
  auto byte = std::make_shared<uint8_t>(static_cast<uint8_t>(status));
  asio::async_write(in->socket, asio::buffer(byte.get(), 1), [in, byte](boost::system::error_code, size_t) {
    boost::system::error_code ignored;
    in->timer.cancel();
    in->socket.shutdown(tcp::socket::shutdown_both, ignored);
    in->socket.close(ignored);
  });
}

void RelayServer::Impl::on_preface(uint64_t id) {
  auto in = incoming.at(id);
  incoming.erase(id);
  auto ticket = decode_pipe_preface(in->preface);
  if (!ticket) {
    metrics.refused(Reason::kBadMessage);
    return;  // not our protocol: close without a word
  }
  auto now = std::chrono::steady_clock::now();
  auto claim = registry.claim(*ticket, now);
  if (auto* r = refusal_of(claim)) {
    metrics.refused(r->reason);
    spdlog::info("relay: refused a pipe end: {}", r->message);
    refuse_pipe_end(in, PipeStatus::kBadTicket);
    return;
  }
  auto c = std::get<Registry::Claim>(claim);
  auto pit = pipes.find(c.pipe);
  if (pit == pipes.end()) std::abort();  // the registry and the pipe map change together
  std::shared_ptr<Pipe> pipe = pit->second;
  auto admitted = registry.admit(c.node, Registry::Slot::kPipeEnd);
  if (auto* r = refusal_of(admitted)) {
    metrics.refused(r->reason);
    refuse_pipe_end(in, PipeStatus::kRefused);
    pipe->close(PipeStatus::kRefused, r->message.c_str());
    return;
  }
  in->timer.cancel();
  pipe->attach(c.side, std::move(in->socket), std::move(in->slot), NodeSlot(weak_from_this(), c.node, Registry::Slot::kPipeEnd));
}

void RelayServer::Impl::conn_closed(ConnId id) {
  registry.unregister(id);
  conns.erase(id);
}

void RelayServer::Impl::pipe_closed(PipeId id) {
  registry.pipe_closed(id);
  pipes.erase(id);
}

void RelayServer::Impl::send_to(ConnId id, const RelayMessage& m) {
  auto it = conns.find(id);
  if (it != conns.end()) it->second->send(m);
}

double RelayServer::Impl::rate_for(const PublicKeyBytes& node) const {
  auto it = config.node_rate_overrides.find(node);
  return it != config.node_rate_overrides.end() ? it->second : config.node_rate;
}

std::shared_ptr<NodeBudget> RelayServer::Impl::budget_for(const PublicKeyBytes& node) {
  auto& b = budgets[node];
  if (!b) {
    b = std::make_shared<NodeBudget>(
        NodeBudget{TokenBucket(rate_for(node), config.node_burst, std::chrono::steady_clock::now())});
  }
  return b;
}

void RelayServer::Impl::rearm_housekeeping() {
  if (stopped) return;
  MonoTime next = last_sweep + kSweepEvery;
  if (auto d = registry.next_deadline(); d && *d < next) next = *d;
  if (housekeeping_at && *housekeeping_at <= next) return;
  housekeeping_at = next;
  housekeeping.expires_at(next);
  auto self = shared_from_this();
  housekeeping.async_wait([this, self](boost::system::error_code ec) {
    if (ec || stopped) return;
    housekeeping_at.reset();
    housekeep();
    rearm_housekeeping();
  });
}

void RelayServer::Impl::housekeep() {
  auto now = std::chrono::steady_clock::now();
  auto expired = registry.expire(now);
  for (auto [conn, request_id] : expired.requests) {
    metrics.refused(Reason::kPipeTimeout);
    send_to(conn, ErrorReply{request_id, Reason::kPipeTimeout,
                             "the peer did not ask for its end of the pipe within " +
                                 std::to_string(config.registry.pipe_request_timeout.count() / 1000) +
                                 " s; it may not be running, or not handle relay pipes"});
  }
  for (PipeId id : expired.pipes) {
    metrics.refused(Reason::kPipeTimeout);
    auto it = pipes.find(id);
    if (it == pipes.end()) continue;
    auto pipe = it->second;  // close() erases it from the map
    pipe->close(PipeStatus::kPeerAbsent, "an end did not connect in time");
    pipes.erase(id);
  }
  if (now - last_sweep >= kSweepEvery) {
    last_sweep = now;
    // Budgets of nodes without pipes, refilled to their burst: forgetting
    // them changes nothing, so memory stays bounded by the live nodes.
    for (auto it = budgets.begin(); it != budgets.end();) {
      it = it->second.use_count() == 1 && it->second->bucket.full(now) ? budgets.erase(it) : std::next(it);
    }
  }
}

void RelayServer::Impl::stop() {
  if (stopped) return;
  stopped = true;
  if (unreported > 0) report_usage();
  boost::system::error_code ignored;
  if (acceptor) acceptor->close(ignored);
  if (metrics_http) metrics_http->stop();
  if (stun) stun->stop();
  housekeeping.cancel();
  for (auto& [id, in] : incoming) {
    in->timer.cancel();
    in->socket.close(ignored);
  }
  incoming.clear();
  // Copies: closing erases from the maps.
  auto all_pipes = pipes;
  for (auto& [id, p] : all_pipes) p->close(PipeStatus::kRefused, "the relay is shutting down");
  auto all_conns = conns;
  for (auto& [id, c] : all_conns) c->close(Reason::kShuttingDown, "the relay is shutting down; reconnect later");
  if (!all_conns.empty() || !all_pipes.empty()) {
    spdlog::info("relay: stopping: closed {} connections and {} pipes", all_conns.size(), all_pipes.size());
  }
}

void RelayServer::Impl::abort_all() {
  // Connections still closing gracefully (their goodbye not flushed yet)
  // when the server goes away: the loop that would finish them may never
  // run again, and each holds the server through its channel's handlers.
  auto all_conns = conns;
  for (auto& [id, c] : all_conns) c->abort("the relay stopped");
  auto all_pipes = pipes;
  for (auto& [id, p] : all_pipes) p->close(PipeStatus::kRefused, "the relay stopped");
}

}  // namespace yonder::relay
