// A node's control connection on the relay: TLS handshake (any key may
// connect; the key it proves is the only one it may register), register,
// then signals, pipe requests and pings until it closes or goes idle.
#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>

#include "relay/server_impl.h"

namespace yonder::relay {
namespace {

std::string node_short_id(const PublicKeyBytes& k) {
  return NodeId(k).short_form();
}

NetAddress observed_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return {};
  return NetAddress{canonical_ip(ep.address().to_string()).value_or(ep.address().to_string()), ep.port()};
}

}  // namespace

NodeConn::NodeConn(std::shared_ptr<RelayServer::Impl> server, ConnId id, tcp::socket socket, ConnectionSlot slot)
    : server_(std::move(server)),
      id_(id),
      observed_(observed_of(socket)),
      slot_(std::in_place, std::move(slot)),
      timer_(server_->io),
      last_heard_(std::chrono::steady_clock::now()),
      messages_(server_->config.message_rate, server_->config.message_burst, std::chrono::steady_clock::now()) {
  tls_ = std::make_shared<link::TlsChannel>(std::move(socket), server_->tls->native(), true);
  // Any key may connect: what it may do is decided by the registry, bound
  // to the key its certificate proves.
  link::TlsContext::set_policy(tls_->native_handle(), [](const PublicKeyBytes&) { return link::KeyVerdict::kPinned; });
}

void NodeConn::start() {
  auto self = shared_from_this();
  timer_.expires_after(server_->config.handshake_timeout);
  timer_.async_wait([this, self](boost::system::error_code ec) {
    if (ec || closed_ || registered_) return;
    spdlog::info("relay: dropping a connection from {}: no registration within {} ms", observed_.to_string(),
                 server_->config.handshake_timeout.count());
    server_->metrics.refused(Reason::kIdleTimeout);
    if (chan_)
      close(Reason::kIdleTimeout, "register right after connecting");
    else
      on_closed(make_error(ErrorCode::kUnavailable, "handshake timed out"));
  });
  std::weak_ptr<NodeConn> weak = self;
  // The handler is stored in the channel: hold this weakly, or the two keep
  // each other alive if the loop stops mid-handshake.
  tls_->async_handshake([weak](boost::system::error_code ec) {
    if (auto c = weak.lock()) c->on_handshake(ec);
  });
}

void NodeConn::on_handshake(boost::system::error_code ec) {
  if (closed_) return;
  auto key = link::TlsContext::peer_key(tls_->native_handle());
  if (ec || !key) {
    on_closed(make_error(ErrorCode::kPermissionDenied, "TLS handshake failed"));
    return;
  }
  key_ = *key;
  // Admit before reading: the register message may already be buffered, and
  // start() hands it over at once.
  Decision<Ok> admitted = Ok{};
  if (server_->config.accept_node && !server_->config.accept_node(*key_)) {
    admitted = Refusal{Reason::kNotAllowed, "this relay serves only the peers of the node that runs it"};
  } else {
    admitted = server_->registry.admit(*key_);
  }
  if (!refusal_of(admitted)) node_slot_.emplace(server_->weak_from_this(), *key_);
  chan_ = std::make_shared<ControlChannel>(tls_);
  auto self = shared_from_this();
  if (auto* r = refusal_of(admitted)) {
    server_->metrics.refused(r->reason);
    spdlog::info("relay: refusing node {} from {}: {}", node_short_id(*key_), observed_.to_string(), r->message);
    chan_->start([](nlohmann::json) {}, [this, self](const Error& why) { on_closed(why); });
    close(r->reason, r->message);
    return;
  }
  chan_->start([this, self](nlohmann::json j) { on_message(j); }, [this, self](const Error& why) { on_closed(why); });
}

void NodeConn::send(const RelayMessage& m) {
  if (chan_ && !chan_->closing() && !chan_->send(to_json(m))) {
    server_->metrics.refused(Reason::kSlowReader);
  }
}

void NodeConn::close(Reason reason, const std::string& message) {
  if (closed_) return;
  if (!chan_) {
    on_closed(make_error(ErrorCode::kUnavailable, message));
    return;
  }
  send(ErrorReply{std::nullopt, reason, message});
  chan_->close_after_flush(make_error(reason_error_code(reason), message));
}

void NodeConn::abort(const std::string& why) {
  if (closed_) return;
  if (chan_) {
    chan_->close(make_error(ErrorCode::kUnavailable, why));  // its on_closed handler ends this connection
  }
  on_closed(make_error(ErrorCode::kUnavailable, why));  // no channel yet, or it had no handler left
}

void NodeConn::on_closed(const Error& why) {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  tls_->close();
  slot_.reset();
  node_slot_.reset();
  if (registered_) spdlog::info("relay: node {} ({}) left: {}", node_short_id(*key_), observed_.to_string(), why.message());
  server_->conn_closed(id_);  // may drop the last reference but this call's own
}

void NodeConn::arm_idle() {
  auto self = shared_from_this();
  timer_.expires_at(last_heard_ + server_->config.idle_timeout);
  timer_.async_wait([this, self](boost::system::error_code ec) {
    if (ec || closed_) return;
    if (std::chrono::steady_clock::now() - last_heard_ >= server_->config.idle_timeout) {
      server_->metrics.refused(Reason::kIdleTimeout);
      close(Reason::kIdleTimeout, "nothing heard for " + std::to_string(server_->config.idle_timeout.count()) +
                                      " ms; send pings more often than idle_timeout_ms");
      return;
    }
    arm_idle();
  });
}

void NodeConn::on_message(const nlohmann::json& j) {
  if (closed_ || chan_->closing()) return;
  last_heard_ = std::chrono::steady_clock::now();
  auto m = decode_client_message(j);
  if (!m) {
    Reason r = m.error().code() == ErrorCode::kResourceExhausted ? Reason::kTooLarge : Reason::kBadMessage;
    server_->metrics.refused(r);
    close(r, m.error().message());
    return;
  }
  if (!registered_ && !std::holds_alternative<Register>(*m)) {
    server_->metrics.refused(Reason::kNotRegistered);
    close(Reason::kNotRegistered, "send register first");
    return;
  }
  std::visit([this](const auto& msg) { handle(msg); }, *m);
}

void NodeConn::refuse(uint64_t request_id, const Refusal& r) {
  server_->metrics.refused(r.reason);
  send(ErrorReply{request_id, r.reason, r.message});
}

bool NodeConn::spend_message_token(uint64_t request_id) {
  if (messages_.available(std::chrono::steady_clock::now()) >= 1) {
    messages_.consume(1);
    return true;
  }
  refuse(request_id, Refusal{Reason::kRateLimited, "more than " + std::to_string(server_->config.message_rate) +
                                                       " messages a second; slow down"});
  return false;
}

void NodeConn::handle(const Register& m) {
  if (registered_) {
    server_->metrics.refused(Reason::kBadMessage);
    close(Reason::kBadMessage, "this connection is registered already");
    return;
  }
  auto reg = server_->registry.register_conn(id_, *key_, m, observed_);
  if (auto* r = refusal_of(reg)) {
    server_->metrics.refused(r->reason);
    spdlog::warn("relay: refused registration from {} (key {}): {}", observed_.to_string(), node_short_id(*key_),
                 r->message);
    close(r->reason, r->message);
    return;
  }
  auto& ok = std::get<Registry::Registered>(reg);
  registered_ = true;
  ++server_->metrics.registrations_total;
  timer_.cancel();  // the handshake deadline; the idle timer replaces it
  arm_idle();
  double rate = server_->rate_for(*key_);
  send(Registered{*key_, ok.nat, static_cast<uint64_t>(rate), static_cast<uint32_t>(server_->config.max_signal_bytes),
                  static_cast<uint32_t>(server_->config.idle_timeout.count())});
  for (auto& [other, report] : ok.nat_changed) server_->send_to(other, NatUpdate{report});
  spdlog::info("relay: node {} registered{} from {} (mapping {}, nat {}), {} peers", node_short_id(*key_),
               m.probe ? " a probe" : "", observed_.to_string(), mapping_name(ok.nat.mapping), verdict_name(ok.nat.nat),
               m.peers.size());
}

void NodeConn::handle(const SetPeers& m) {
  if (!spend_message_token(m.id)) return;
  auto r = server_->registry.set_peers(id_, m.peers, m.rendezvous);
  if (auto* no = refusal_of(r)) return refuse(m.id, *no);
  send(Ack{m.id});
}

void NodeConn::handle(const SendSignal& m) {
  if (!spend_message_token(m.id)) return;
  if (m.data.size() > server_->config.max_signal_bytes) {
    return refuse(m.id, Refusal{Reason::kTooLarge, "signals on this relay carry at most " +
                                                       std::to_string(server_->config.max_signal_bytes) + " bytes"});
  }
  auto route = server_->registry.route_signal(id_, m.to);
  if (auto* no = refusal_of(route)) return refuse(m.id, *no);
  server_->send_to(std::get<ConnId>(route), IncomingSignal{*key_, m.data, observed_.ip});
  ++server_->metrics.signals_total;
  server_->metrics.signal_bytes_total += m.data.size();
  send(Ack{m.id});
}

void NodeConn::handle(const RequestPipe& m) {
  if (!spend_message_token(m.id)) return;
  ++server_->metrics.pipe_requests_total;
  if (auto spent = server_->monthly_refusal()) return refuse(m.id, *spent);
  auto outcome = server_->registry.request_pipe(id_, m.id, m.to, std::chrono::steady_clock::now(), m.rendezvous);
  if (auto* no = refusal_of(outcome)) return refuse(m.id, *no);
  auto& o = std::get<Registry::PipeOutcome>(outcome);
  if (auto* wait = std::get_if<Registry::PipeWait>(&o)) {
    server_->send_to(wait->notify, PipeWanted{*key_, wait->rendezvous});
  } else {
    auto& match = std::get<Registry::PipeMatch>(o);
    server_->pipes[match.pipe] = std::make_shared<Pipe>(
        server_, match.pipe, std::array<PublicKeyBytes, 2>{match.sides[0].node, match.sides[1].node});
    auto expires = static_cast<uint32_t>(server_->config.registry.ticket_timeout.count());
    for (const auto& side : match.sides) {
      server_->send_to(side.conn, PipeReady{side.request_id, side.peer, side.ticket, side.initiator, expires});
    }
    spdlog::info("relay: pipe {} matched: {} <-> {}", match.pipe, node_short_id(match.sides[0].node),
                 node_short_id(match.sides[1].node));
  }
  server_->rearm_housekeeping();
}

void NodeConn::handle(const Ping& m) {
  if (!spend_message_token(m.id)) return;
  send(Pong{m.id});
}

}  // namespace yonder::relay
