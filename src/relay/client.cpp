#include "relay/client.h"

#include <spdlog/spdlog.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <map>

#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "relay/control_channel.h"

namespace yonder::relay {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

Result<std::pair<std::string, std::string>> split_host_port(const std::string& a) {
  std::string host, port;
  if (!a.empty() && a.front() == '[') {
    size_t close = a.find(']');
    if (close == std::string::npos || close + 1 >= a.size() || a[close + 1] != ':') {
      return make_error(ErrorCode::kInvalidArgument, "bad relay address \"" + a + "\" (expected [v6]:port)");
    }
    host = a.substr(1, close - 1);
    port = a.substr(close + 2);
  } else {
    size_t colon = a.rfind(':');
    if (colon == std::string::npos) {
      return make_error(ErrorCode::kInvalidArgument, "relay address \"" + a + "\" has no port (HOST:PORT)");
    }
    host = a.substr(0, colon);
    port = a.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return make_error(ErrorCode::kInvalidArgument, "bad relay address \"" + a + "\"");
  return std::make_pair(host, port);
}

std::optional<NetAddress> local_address(const tcp::socket& s) {
  error_code ec;
  auto ep = s.local_endpoint(ec);
  if (ec) return std::nullopt;
  auto ip = canonical_ip(ep.address().to_string());
  if (!ip) return std::nullopt;
  return NetAddress{*ip, ep.port()};
}

// Wraps a callback so that only its first call goes through.
template <typename... Args>
std::function<void(Args...)> once(std::function<void(Args...)> f) {
  auto slot = std::make_shared<std::function<void(Args...)>>(std::move(f));
  return [slot](Args... args) {
    if (!*slot) return;
    auto g = std::move(*slot);
    *slot = nullptr;
    g(std::forward<Args>(args)...);
  };
}

struct Dialed {
  std::shared_ptr<link::TlsChannel> tls;
  tcp::endpoint remote;
  PublicKeyBytes relay_key{};
};

// TCP connect and TLS handshake with the relay, within `timeout`; the relay
// must prove `pin` when set (`from_link`: a share link named it).
void dial(asio::io_context& io, std::shared_ptr<link::TlsContext> ctx, const std::string& address,
          std::optional<PublicKeyBytes> pin, bool from_link, std::chrono::milliseconds timeout,
          std::function<void(Result<Dialed>)> done_in) {
  auto done = once(std::move(done_in));
  auto hp = split_host_port(address);
  if (!hp) return done(std::move(hp).error());
  auto resolver = std::make_shared<tcp::resolver>(io);
  auto socket = std::make_shared<tcp::socket>(io);
  auto chan_slot = std::make_shared<std::weak_ptr<link::TlsChannel>>();
  auto timer = std::make_shared<asio::steady_timer>(io, timeout);
  timer->async_wait([resolver, socket, chan_slot, done, address, timeout](error_code ec) {
    if (ec) return;
    resolver->cancel();
    error_code ignored;
    if (auto chan = chan_slot->lock())
      chan->close();
    else
      socket->close(ignored);
    done(make_error(ErrorCode::kUnavailable,
                    "the relay at " + address + " did not answer within " + std::to_string(timeout.count()) + " ms"));
  });
  resolver->async_resolve(hp->first, hp->second, [=](error_code ec, tcp::resolver::results_type results) {
    if (ec) {
      timer->cancel();
      return done(
          make_error(ErrorCode::kUnavailable, "cannot resolve the relay address " + address + ": " + ec.message()));
    }
    asio::async_connect(*socket, results, [=](error_code cec, const tcp::endpoint& remote) {
      if (cec) {
        timer->cancel();
        return done(make_error(ErrorCode::kUnavailable, "cannot connect to the relay at " + address + ": " +
                                                            cec.message() + "; check the address and that it runs"));
      }
      error_code ignored;
      socket->set_option(tcp::no_delay(true), ignored);
      auto chan = std::make_shared<link::TlsChannel>(std::move(*socket), ctx->native(), false);
      *chan_slot = chan;
      link::TlsContext::set_policy(chan->native_handle(), [pin](const PublicKeyBytes& key) {
        return !pin || key == *pin ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
      });
      std::weak_ptr<link::TlsChannel> weak = chan;
      chan->async_handshake([weak, timer, done, address, pin, from_link, remote](error_code hec) {
        timer->cancel();
        auto live = weak.lock();
        if (!live) return done(make_error(ErrorCode::kUnavailable, "connection to the relay closed"));
        auto key = link::TlsContext::peer_key(live->native_handle());
        if (hec || !key) {
          live->close();
          if (key && pin && *key != *pin && from_link) {
            return done(make_error(ErrorCode::kPermissionDenied,
                                   "the relay at " + address + " proved key " + NodeId(*key).to_string() +
                                       ", not the key " + NodeId(*pin).to_string() +
                                       " the provider's share link names: it is not the provider's relay, or its "
                                       "key changed; ask the provider for a new link"));
          }
          if (key && pin && *key != *pin) {
            return done(make_error(ErrorCode::kPermissionDenied,
                                   "the relay at " + address + " proved key " + NodeId(*key).to_string() +
                                       ", not the configured " + NodeId(*pin).to_string() +
                                       "; check the relay's key (yonder-relay prints it at start)"));
          }
          return done(make_error(ErrorCode::kUnavailable, "TLS handshake with the relay at " + address + " failed"));
        }
        done(Dialed{live, remote, *key});
      });
    });
  });
}

}  // namespace

struct RelayClient::State {
  State(asio::io_context& io_in, PublicKeyBytes key, RelayClientConfig c)
      : io(io_in), self_key(key), config(std::move(c)) {}
  asio::io_context& io;
  std::shared_ptr<link::TlsContext> tls;
  PublicKeyBytes self_key;
  RelayClientConfig config;
  Handlers handlers;
  std::shared_ptr<ControlChannel> chan;
  tcp::endpoint relay_endpoint;
  PublicKeyBytes relay_key{};
  std::function<void(Result<Registration>)> connect_done;
  std::map<uint64_t, std::function<void(Result<RelayMessage>)>> waiting;
  uint64_t next_id = 1;
  std::unique_ptr<asio::steady_timer> connect_timer;
  std::unique_ptr<asio::steady_timer> keepalive_timer;
  std::optional<uint64_t> unanswered_ping;
  std::optional<Error> relay_said;  // an error{} without id: why the relay closes
  bool closing_by_us = false;
};

Result<std::shared_ptr<RelayClient>> RelayClient::create(asio::io_context& io, const Identity& identity,
                                                         RelayClientConfig config) {
  if (config.address.empty()) return make_error(ErrorCode::kInvalidArgument, "no relay address configured");
  auto ctx = link::TlsContext::create(identity, false);
  if (!ctx) return std::move(ctx).error();
  auto client = std::shared_ptr<RelayClient>(new RelayClient(io, identity, std::move(config)));
  client->state_->tls = *ctx;
  return client;
}

RelayClient::RelayClient(asio::io_context& io, const Identity& identity, RelayClientConfig config)
    : state_(std::make_unique<State>(io, identity.public_key(), std::move(config))) {}

RelayClient::~RelayClient() {
  // Dropped while connected: the connection goes with us.
  if (state_ && state_->chan && !state_->chan->closed()) {
    state_->chan->close(make_error(ErrorCode::kUnavailable, "the relay client was destroyed"));
  }
}

void RelayClient::connect(Handlers handlers, std::function<void(Result<Registration>)> done) {
  State& st = *state_;
  if (st.chan || st.connect_done || closed_) {
    return done(make_error(ErrorCode::kFailedPrecondition, "connect() is called once per RelayClient"));
  }
  st.handlers = std::move(handlers);
  st.connect_done = once(std::move(done));
  auto self = shared_from_this();
  auto fail = [self](Error e) {
    State& s = *self->state_;
    self->closed_ = true;
    s.connect_timer->cancel();
    if (s.chan) s.chan->close(e);  // on_closed reports to connect_done
    if (s.connect_done) {
      auto d = std::move(s.connect_done);
      s.connect_done = nullptr;
      d(std::move(e));
    }
  };
  // One deadline for connect, TLS and the relay's `registered`.
  st.connect_timer = std::make_unique<asio::steady_timer>(st.io, st.config.connect_timeout);
  st.connect_timer->async_wait([self, fail](error_code ec) {
    if (ec || !self->state_->connect_done) return;
    fail(make_error(ErrorCode::kUnavailable,
                    "the relay at " + self->state_->config.address + " did not confirm the registration in time"));
  });
  dial(st.io, st.tls, st.config.address, st.config.relay_key, st.config.relay_key_from_share_link,
       st.config.connect_timeout,
       [self, fail](Result<Dialed> d) {
         State& s = *self->state_;
         if (!d) return fail(std::move(d).error());
         if (!s.connect_done) {  // timed out meanwhile
           d->tls->close();
           return;
         }
         s.relay_endpoint = d->remote;
         s.relay_key = d->relay_key;
         s.chan = std::make_shared<ControlChannel>(d->tls);
         // Weak: the channel lives in our state, so a strong capture would
         // keep both alive for as long as the connection (LSan: a client
         // dropped while connected leaked).
         std::weak_ptr<RelayClient> weak = self;
         s.chan->start(
             [weak](nlohmann::json j) {
               if (auto me = weak.lock()) me->on_message(std::move(j));
             },
             [weak](const Error& why) {
               if (auto me = weak.lock()) me->on_closed(why);
             });
         Register reg{s.self_key, s.config.peers, s.config.rendezvous, local_address(d->tls->socket()), false};
         s.chan->send(to_json(ClientMessage(std::move(reg))));
       });
}

}  // namespace yonder::relay

namespace yonder::relay {

uint64_t RelayClient::next_request_id() {
  return state_->next_id++;
}

void RelayClient::on_message(nlohmann::json j) {
  State& st = *state_;
  auto decoded = decode_relay_message(j);
  if (!decoded) {
    st.chan->close(Error(decoded.error()).with_context("relay " + st.config.address));
    return;
  }
  RelayMessage& m = *decoded;
  if (auto* reg = std::get_if<Registered>(&m)) {
    if (!st.connect_done) return;  // one registration per connection
    if (reg->node != st.self_key) {
      st.chan->close(make_error(ErrorCode::kInvalidArgument, "the relay registered another key than ours"));
      return;
    }
    registration_ = Registration{st.relay_key, reg->nat, reg->node_rate, reg->max_signal_bytes,
                                 std::chrono::milliseconds(reg->idle_timeout_ms)};
    st.connect_timer->cancel();
    arm_keepalive();
    spdlog::debug("relay {}: registered, observed {} (nat {})", st.config.address, reg->nat.observed.to_string(),
                  verdict_name(reg->nat.nat));
    auto done = std::move(st.connect_done);
    st.connect_done = nullptr;
    done(*registration_);
    return;
  }
  if (auto* e = std::get_if<ErrorReply>(&m)) {
    Error err = Refusal{e->reason, e->message}.to_error();
    if (!e->id) {
      st.relay_said = std::move(err);  // the relay closes the connection after this
      return;
    }
    auto it = st.waiting.find(*e->id);
    if (it == st.waiting.end()) return;
    auto reply = std::move(it->second);
    st.waiting.erase(it);
    reply(std::move(err));
    return;
  }
  if (auto* s = std::get_if<IncomingSignal>(&m)) {
    if (st.handlers.signal) st.handlers.signal(s->from, std::move(s->data), s->from_host);
    return;
  }
  if (auto* w = std::get_if<PipeWanted>(&m)) {
    if (w->rendezvous) {
      if (st.handlers.pairing_pipe_wanted) st.handlers.pairing_pipe_wanted(w->from, *w->rendezvous);
    } else if (st.handlers.pipe_wanted) {
      st.handlers.pipe_wanted(w->from);
    }
    return;
  }
  if (auto* n = std::get_if<NatUpdate>(&m)) {
    if (registration_) registration_->nat = n->nat;
    if (st.handlers.nat) st.handlers.nat(n->nat);
    return;
  }
  uint64_t id = std::visit(
      [](const auto& v) -> uint64_t {
        if constexpr (requires { v.id; }) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v.id)>, uint64_t>) return v.id;
        }
        return 0;
      },
      m);
  auto it = st.waiting.find(id);
  if (it == st.waiting.end()) return;  // an answer nobody waits for: ignore
  auto reply = std::move(it->second);
  st.waiting.erase(it);
  reply(std::move(m));
}

void RelayClient::on_closed(const Error& why) {
  State& st = *state_;
  closed_ = true;
  if (st.connect_timer) st.connect_timer->cancel();
  if (st.keepalive_timer) st.keepalive_timer->cancel();
  Error err = st.relay_said ? *st.relay_said : Error(why).with_context("relay " + st.config.address);
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  for (auto& [id, reply] : waiting) reply(err);
  if (st.connect_done) {
    auto done = std::move(st.connect_done);
    st.connect_done = nullptr;
    done(err);
    return;
  }
  if (!st.closing_by_us && st.handlers.closed) st.handlers.closed(err);
  st.handlers = Handlers{};  // they may hold our owner
}

void RelayClient::close() {
  State& st = *state_;
  st.closing_by_us = true;
  if (st.chan && !st.chan->closing()) {
    st.chan->close_after_flush(make_error(ErrorCode::kUnavailable, "closed by this node"));
  }
  if (st.keepalive_timer) st.keepalive_timer->cancel();
}

void RelayClient::request(ClientMessage m, uint64_t id, std::function<void(Result<RelayMessage>)> reply) {
  State& st = *state_;
  if (!registered() || !st.chan || st.chan->closing()) {
    return reply(make_error(ErrorCode::kUnavailable,
                            "not connected to the relay " + st.config.address + "; connect first (or reconnect)"));
  }
  st.waiting[id] = std::move(reply);
  st.chan->send(to_json(m));
}

void RelayClient::arm_keepalive() {
  State& st = *state_;
  if (st.config.keepalive.count() <= 0) return;
  if (!st.keepalive_timer) st.keepalive_timer = std::make_unique<asio::steady_timer>(st.io);
  st.keepalive_timer->expires_after(st.config.keepalive);
  std::weak_ptr<RelayClient> weak = weak_from_this();
  st.keepalive_timer->async_wait([weak](error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->registered()) return;
    State& s = *self->state_;
    if (s.unanswered_ping) {
      s.chan->close(make_error(ErrorCode::kUnavailable, "the relay did not answer a ping for " +
                                                            std::to_string(s.config.keepalive.count()) + " ms"));
      return;
    }
    uint64_t id = self->next_request_id();
    s.unanswered_ping = id;
    self->request(Ping{id}, id, [weak](Result<RelayMessage>) {
      if (auto me = weak.lock()) me->state_->unanswered_ping.reset();
    });
    self->arm_keepalive();
  });
}

void RelayClient::set_peers(std::vector<PublicKeyBytes> peers, std::function<void(Status)> done) {
  set_peers(std::move(peers), state_->config.rendezvous, std::move(done));
}

void RelayClient::set_peers(std::vector<PublicKeyBytes> peers, std::vector<Rendezvous> rendezvous,
                            std::function<void(Status)> done) {
  state_->config.peers = peers;
  state_->config.rendezvous = rendezvous;
  uint64_t id = next_request_id();
  request(SetPeers{id, std::move(peers), std::move(rendezvous)}, id, [done](Result<RelayMessage> r) {
    if (!r) return done(std::move(r).error());
    done(ok_status());
  });
}

void RelayClient::send_signal(const PublicKeyBytes& to, Bytes data, std::function<void(Status)> done) {
  size_t limit = registration_ ? registration_->max_signal_bytes : kMaxSignalBytes;
  if (data.size() > limit) {
    return done(make_error(ErrorCode::kResourceExhausted, "a signal carries at most " + std::to_string(limit) +
                                                              " bytes on this relay; open a pipe for more"));
  }
  uint64_t id = next_request_id();
  request(SendSignal{id, to, std::move(data)}, id, [done](Result<RelayMessage> r) {
    if (!r) return done(std::move(r).error());
    done(ok_status());
  });
}

void RelayClient::open_pipe(const PublicKeyBytes& to, std::function<void(Result<RelayPipe>)> done) {
  open_pipe_impl(to, std::nullopt, std::move(done));
}

void RelayClient::open_pipe(const PublicKeyBytes& to, const Rendezvous& token,
                            std::function<void(Result<RelayPipe>)> done) {
  open_pipe_impl(to, token, std::move(done));
}

void RelayClient::open_pipe_impl(const PublicKeyBytes& to, std::optional<Rendezvous> token,
                                 std::function<void(Result<RelayPipe>)> done) {
  uint64_t id = next_request_id();
  std::weak_ptr<RelayClient> weak = weak_from_this();
  request(RequestPipe{id, to, token}, id, [weak, done](Result<RelayMessage> r) {
    if (!r) return done(std::move(r).error());
    auto* ready = std::get_if<PipeReady>(&*r);
    auto self = weak.lock();
    if (!ready || !self) return done(make_error(ErrorCode::kInternal, "the relay answered a pipe request oddly"));
    self->join_pipe(*ready, done);
  });
}

// Connects our end of a matched pipe: a plain TCP connection to the relay,
// the preface with our ticket, then one status byte. No TLS to the relay on
// it: what runs inside is the peers' own TLS session.
void RelayClient::join_pipe(const PipeReady& ready, std::function<void(Result<RelayPipe>)> done_in) {
  State& st = *state_;
  auto done = once(std::move(done_in));
  auto socket = std::make_shared<tcp::socket>(st.io);
  auto timer = std::make_shared<asio::steady_timer>(
      st.io, std::chrono::milliseconds(ready.expires_ms) + st.config.pipe_connect_timeout);
  timer->async_wait([socket, done](error_code ec) {
    if (ec) return;
    error_code ignored;
    socket->close(ignored);
    done(make_error(ErrorCode::kUnavailable, "the relay pipe was not joined in time; try again"));
  });
  auto preface = std::make_shared<Bytes>(encode_pipe_preface(ready.ticket));
  auto status = std::make_shared<uint8_t>(0xff);
  PublicKeyBytes peer = ready.peer;
  bool initiator = ready.initiator;
  std::string address = st.config.address;
  socket->async_connect(st.relay_endpoint, [=](error_code ec) {
    if (ec) {
      timer->cancel();
      return done(make_error(ErrorCode::kUnavailable,
                             "cannot connect the pipe end to the relay at " + address + ": " + ec.message()));
    }
    error_code ignored;
    socket->set_option(tcp::no_delay(true), ignored);
    asio::async_write(*socket, asio::buffer(*preface), [=](error_code wec, size_t) {
      if (wec) {
        timer->cancel();
        return done(make_error(ErrorCode::kUnavailable, "the relay closed the pipe end: " + wec.message()));
      }
      // Exactly one byte: what follows it is the peer's.
      asio::async_read(*socket, asio::buffer(status.get(), 1), [=](error_code rec, size_t) {
        timer->cancel();
        if (rec) return done(make_error(ErrorCode::kUnavailable, "the relay closed the pipe end before joining it"));
        auto st2 = pipe_status_to_status(*status);
        if (!st2) return done(std::move(st2).error());
        done(RelayPipe{std::move(*socket), peer, initiator});
      });
    });
  });
}

void RelayClient::probe_nat(std::function<void(Result<NatReport>)> done_in) {
  State& st = *state_;
  auto done = once(std::move(done_in));
  if (!registered()) {
    return done(make_error(ErrorCode::kFailedPrecondition, "connect to the relay before probing the NAT"));
  }
  PublicKeyBytes self_key = st.self_key;
  std::string address = st.config.address;
  dial(st.io, st.tls, st.config.address, st.relay_key, st.config.relay_key_from_share_link, st.config.connect_timeout,
       [done, self_key, address](Result<Dialed> d) {
         if (!d) return done(std::move(d).error());
         auto chan = std::make_shared<ControlChannel>(d->tls);
         std::weak_ptr<ControlChannel> weak = chan;
         chan->start(
             [weak, done](nlohmann::json j) {
               auto c = weak.lock();
               auto m = decode_relay_message(j);
               if (!m) return done(std::move(m).error());
               if (auto* reg = std::get_if<Registered>(&*m))
                 done(reg->nat);
               else if (auto* e = std::get_if<ErrorReply>(&*m))
                 done(Refusal{e->reason, e->message}.to_error());
               if (c) c->close_after_flush(make_error(ErrorCode::kUnavailable, "probe done"));
             },
             [chan, done, address](const Error& why) {
               // `chan` is held here until the channel closes, then dropped.
               done(Error(why).with_context("NAT probe to relay " + address));
             });
         Register reg{self_key, {}, {}, local_address(d->tls->socket()), true};
         chan->send(to_json(ClientMessage(std::move(reg))));
       });
}

}  // namespace yonder::relay
