#include <openssl/ssl.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <spdlog/spdlog.h>

#include "net/link/link_service_impl.h"

namespace yonder::link {
namespace {

// "host:port" or "[v6]:port".
Result<std::pair<std::string, std::string>> split_host_port(const std::string& a) {
  std::string host, port;
  if (!a.empty() && a.front() == '[') {
    size_t close = a.find(']');
    if (close == std::string::npos || close + 1 >= a.size() || a[close + 1] != ':') {
      return make_error(ErrorCode::kInvalidArgument, "bad address \"" + a + "\" (expected [v6]:port)");
    }
    host = a.substr(1, close - 1);
    port = a.substr(close + 2);
  } else {
    size_t colon = a.rfind(':');
    if (colon == std::string::npos) return make_error(ErrorCode::kInvalidArgument, "address \"" + a + "\" has no port");
    host = a.substr(0, colon);
    port = a.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return make_error(ErrorCode::kInvalidArgument, "bad address \"" + a + "\"");
  return std::make_pair(host, port);
}

std::string short_id(const PublicKeyBytes& k) { return NodeId(k).short_form(); }

}  // namespace

LinkService::Impl::Impl(asio::io_context& io_ctx, const Identity& identity, TrustPolicy& p, LinkConfig c)
    : io(io_ctx),
      self_key(identity.public_key()),
      policy(p),
      config(std::move(c)),
      server_tls(TlsContext::create(identity, true).value()),
      client_tls(TlsContext::create(identity, false).value()) {}

LinkService::LinkService(asio::io_context& io, const Identity& identity, TrustPolicy& policy, LinkConfig config)
    : impl_(std::make_unique<Impl>(io, identity, policy, std::move(config))) {}

LinkService::~LinkService() { stop(); }

Status LinkService::listen(const std::string& host_port) {
  auto hp = split_host_port(host_port);
  if (!hp) return std::move(hp).error();
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(hp->first, ec);
  if (ec) return make_error(ErrorCode::kInvalidArgument, "link.listen must be an IP address and port, not " + host_port);
  unsigned long port = std::strtoul(hp->second.c_str(), nullptr, 10);
  if (port > 65535) return make_error(ErrorCode::kInvalidArgument, "bad port in " + host_port);
  auto acc = std::make_unique<asio::ip::tcp::acceptor>(impl_->io);
  asio::ip::tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::kUnavailable, "cannot listen for peers on " + host_port + ": " + ec.message() +
                                                   "; set link.listen to a free address (port 0 picks one)");
  }
  impl_->acceptor = std::move(acc);
  impl_->accept_next();
  return ok_status();
}

uint16_t LinkService::port() const {
  if (!impl_->acceptor) return 0;
  boost::system::error_code ec;
  return impl_->acceptor->local_endpoint(ec).port();
}

void LinkService::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->keep.clear();
  if (impl_->acceptor) {
    boost::system::error_code ec;
    impl_->acceptor->close(ec);
  }
  std::vector<std::shared_ptr<Session>> all;
  for (auto& [ptr, c] : impl_->conns) all.push_back(c.session);
  for (auto& s : all) s->abort("the node is shutting down");
}

void LinkService::add_method(const std::string& method, RpcHandler handler) {
  impl_->methods[method] = std::move(handler);
}

bool LinkService::has_method(const std::string& method) const { return impl_->methods.count(method) != 0; }

void LinkService::disconnect(const PublicKeyBytes& peer, const std::string& reason) {
  std::vector<std::shared_ptr<Session>> victims;
  for (auto& [ptr, c] : impl_->conns) {
    if (c.session->peer() == peer) victims.push_back(c.session);
  }
  for (auto& s : victims) s->close(reason);
}

std::vector<HandshakeCount> LinkService::handshakes() const {
  std::vector<HandshakeCount> out;
  for (const auto& [key, n] : impl_->handshake_counts) out.push_back({key.first, key.second, n});
  return out;
}

std::vector<SessionInfo> LinkService::sessions() const {
  std::vector<SessionInfo> out;
  for (const auto& [ptr, c] : impl_->conns) {
    SessionInfo i;
    i.peer = c.session->peer();
    i.established = c.session->established();
    i.pairing_only = c.session->verdict() == KeyVerdict::kPairingOnly;
    i.dialed = c.dialed;
    i.path = c.session->path();
    i.draining = c.session->draining();
    i.rtt = c.session->rtt();
    i.streams = c.streams.size();
    i.bytes_in = c.session->bytes_in();
    i.bytes_out = c.session->bytes_out();
    out.push_back(i);
  }
  return out;
}

void LinkService::Impl::accept_next() {
  if (stopped || !acceptor) return;
  acceptor->async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket socket) {
    if (stopped) return;
    if (!ec) on_accepted(std::move(socket));
    accept_next();
  });
}

void LinkService::Impl::on_accepted(asio::ip::tcp::socket socket) {
  boost::system::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  std::string path = "direct from " + remote.address().to_string() + ":" + std::to_string(remote.port());
  start_acceptor(std::move(socket), path, std::nullopt, nullptr);
}

void LinkService::Impl::start_acceptor(asio::ip::tcp::socket socket, std::string path,
                                       std::optional<PublicKeyBytes> expect, std::function<void(Status)> waiter) {
  boost::system::error_code ec;
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  auto chan = std::make_shared<TlsChannel>(std::move(socket), server_tls->native(), true);
  TlsContext::set_policy(chan->native_handle(), [this, expect](const PublicKeyBytes& key) {
    // A carrier names the peer it joins us with: any other key is refused.
    if (expect && key != *expect) return KeyVerdict::kReject;
    return policy.classify(key);
  });
  auto timer = std::make_shared<asio::steady_timer>(io, config.connect_timeout);
  std::weak_ptr<TlsChannel> weak_chan = chan;
  timer->async_wait([weak_chan](boost::system::error_code e) {
    auto c = weak_chan.lock();
    if (!e && c) c->close();  // a dialer that stalls the handshake
  });
  // The handshake's handler is stored in the channel: hold it weakly, or the
  // two would keep each other alive if the loop stops mid-handshake.
  chan->async_handshake([this, weak_chan, timer, path, waiter](boost::system::error_code hec) {
    auto live = weak_chan.lock();
    timer->cancel();
    auto fail = [&](const char* why) {
      if (waiter) waiter(make_error(ErrorCode::kUnavailable, std::string("the carrier's handshake failed: ") + why));
    };
    if (!live) return fail("the node is shutting down");
    if (hec || stopped) {
      if (!stopped) {
        bool rejected = TlsContext::peer_key(live->native_handle()).has_value() &&
                        TlsContext::verdict(live->native_handle()) == KeyVerdict::kReject;
        count_handshake(path, rejected ? "refused" : hec == asio::error::operation_aborted ? "timeout" : "tls");
      }
      live->close();  // rejected keys end here: the dialer learned nothing
      return fail("refused or broken");
    }
    SSL* ssl = live->native_handle();
    auto key = TlsContext::peer_key(ssl);
    KeyVerdict verdict = TlsContext::verdict(ssl);
    if (!key || verdict == KeyVerdict::kReject) {
      count_handshake(path, "refused");
      live->close();
      return fail("the key was refused");
    }
    auto session = std::make_shared<Session>(live, Role::kAcceptor, *key, verdict, this, path, mux_config());
    Conn& c = conns[session.get()];
    c.session = session;
    c.tokens = config.rate_burst;
    c.refilled = steady_now();
    if (waiter) c.waiters.push_back(waiter);
    session->start();
    if (verdict == KeyVerdict::kPinned) {
      send_control(c, {{"type", "hello"}, {"v", 1}, {"name", config.name}});
      policy.seen(*key);
    } else {
      spdlog::info("link: pairing attempt from {} ({})", short_id(*key), session->path());
    }
  });
}

void LinkService::Impl::send_control(Conn& c, const nlohmann::json& msg) {
  Bytes b = encode_message(msg);
  auto w = c.session->mux().write(wire::kControlStream, b);
  // The control stream's credit is far above what hello/pair need.
  if (!w || *w != b.size()) {
    c.session->close("control stream is blocked");
    return;
  }
  c.session->flush();
}

Conn* LinkService::Impl::conn_of(const std::shared_ptr<Session>& s) {
  auto it = conns.find(s.get());
  return it == conns.end() ? nullptr : &it->second;
}

Conn* LinkService::Impl::find_established(const PublicKeyBytes& peer) {
  Conn* best = nullptr;
  for (auto& [ptr, c] : conns) {
    if (c.session->peer() == peer && !c.session->closed() && !c.session->draining() &&
        c.session->verdict() == KeyVerdict::kPinned && c.session->established()) {
      if (best == nullptr || path_rank(c.session->path()) < path_rank(best->session->path())) best = &c;
    }
  }
  return best;
}

void LinkService::Impl::with_session(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                                     std::function<void(Result<Conn*>)> use) {
  if (Conn* c = find_established(peer)) {
    use(c);
    return;
  }
  for (auto& [ptr, c] : conns) {
    if (c.dialed && c.session->peer() == peer && !c.session->established() && !c.session->closed()) {
      c.waiters.push_back([this, peer, use](Status st) {
        if (!st) return use(std::move(st).error());
        Conn* conn = find_established(peer);
        if (!conn) return use(make_error(ErrorCode::kUnavailable, "the link closed right after it was set up"));
        use(conn);
      });
      return;
    }
  }
  dial(peer, addresses, std::nullopt, nullptr, [this, peer, use](Status st) {
    if (!st) return use(std::move(st).error());
    Conn* conn = find_established(peer);
    if (!conn) return use(make_error(ErrorCode::kUnavailable, "the link closed right after it was set up"));
    use(conn);
  });
}

namespace {

// One dial to a peer over its addresses and, when a carrier dialer is set,
// a carrier too (started after a head start, or when the addresses fail):
// the first session up answers; the other, if it also comes up, drains.
struct DialRace {
  std::function<void(Status)> done;
  bool settled = false;
  bool direct_over = false, carrier_started = false, carrier_over = false;
  std::string direct_error, carrier_error;
  // A refusal or a wrong key (an answer from the peer) beats "unreachable":
  // a caller stops on it instead of retrying.
  ErrorCode code = ErrorCode::kUnavailable;
  std::unique_ptr<asio::steady_timer> head_start;
};

bool is_answer(ErrorCode code) { return code == ErrorCode::kPermissionDenied || code == ErrorCode::kFailedPrecondition; }

}  // namespace

void LinkService::Impl::dial(const PublicKeyBytes& peer, const std::vector<std::string>& all_addresses,
                             std::optional<ShareLink> pairing, PairDone pair_done,
                             std::function<void(Status)> established) {
  // "relay:HOST:PORT" entries name the peer's relays (the carrier dialer's
  // business), not addresses to dial.
  std::vector<std::string> addresses;
  for (const auto& a : all_addresses) {
    if (a.rfind("relay:", 0) != 0) addresses.push_back(a);
  }
  if (addresses.empty() && !carrier_dialer) {
    established(make_error(ErrorCode::kUnavailable, "no known address for peer " + short_id(peer) +
                                                        " and no relay configured (link.relays)"));
    return;
  }
  auto race = std::make_shared<DialRace>();
  race->done = std::move(established);
  race->direct_over = addresses.empty();
  race->carrier_over = !carrier_dialer;
  auto settle_error = [race, peer] {
    if (race->settled || !race->direct_over || !race->carrier_over) return;
    race->settled = true;
    if (race->head_start) race->head_start->cancel();
    std::string why = race->direct_error;
    if (!race->carrier_error.empty()) why += (why.empty() ? "" : "; ") + race->carrier_error;
    // The most telling error: a refusal or a wrong key beats "unreachable".
    race->done(make_error(race->code, why.empty() ? "cannot reach peer " + short_id(peer) : why));
  };
  auto start_carrier = [this, race, peer, pairing, pair_done, settle_error] {
    if (race->settled || race->carrier_started || race->carrier_over) return;
    race->carrier_started = true;
    dial_carrier(peer, pairing, pair_done, [race, settle_error](Status st) {
      if (race->settled) return;
      if (st) {
        race->settled = true;
        if (race->head_start) race->head_start->cancel();
        return race->done(ok_status());
      }
      race->carrier_over = true;
      race->carrier_error = st.error().message();
      if (is_answer(st.error().code())) race->code = st.error().code();
      settle_error();
    });
  };
  if (!addresses.empty()) {
    dial_address(peer, addresses, 0, pairing, pair_done, "", [race, start_carrier, settle_error](Status st) {
      if (race->settled) return;
      if (st) {
        race->settled = true;
        if (race->head_start) race->head_start->cancel();
        return race->done(ok_status());
      }
      race->direct_over = true;
      // A key mismatch or a refusal is an answer: do not go round it.
      ErrorCode code = st.error().code();
      race->direct_error = st.error().message();
      if (is_answer(code)) {
        race->code = code;
        race->carrier_over = true;
      }
      if (race->carrier_over) return settle_error();
      start_carrier();
    });
  }
  if (carrier_dialer) {
    if (addresses.empty()) {
      start_carrier();
    } else {
      race->head_start = std::make_unique<asio::steady_timer>(io, carrier_head_start);
      race->head_start->async_wait([start_carrier](boost::system::error_code ec) {
        if (!ec) start_carrier();
      });
    }
  }
}

void LinkService::Impl::dial_carrier(const PublicKeyBytes& peer, std::optional<ShareLink> pairing, PairDone pair_done,
                                     std::function<void(Status)> done) {
  carrier_dialer(peer, pairing, [this, peer, pairing, pair_done, done](Result<Carrier> carrier) {
    if (!carrier) return done(std::move(carrier).error());
    asio::ip::tcp::socket socket(io);
    boost::system::error_code ec;
    socket.assign(asio::ip::tcp::v4(), carrier->fd, ec);
    if (ec) {
      ::close(carrier->fd);
      return done(make_error(ErrorCode::kInternal, "cannot use the carrier socket: " + ec.message()));
    }
    if (stopped) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
    if (!carrier->tls_client) {
      // Both sides asked at once and the peer's request came first: it runs
      // the TLS client, we answer as the acceptor, and this dial completes
      // when that session is established.
      return start_acceptor(std::move(socket), carrier->path, peer, done);
    }
    auto timer = std::make_shared<asio::steady_timer>(io, config.connect_timeout);
    start_dialer(std::move(socket), peer, pairing, pair_done, done, carrier->path, carrier->path, timer);
  });
}

void LinkService::Impl::dial_address(const PublicKeyBytes& peer, std::vector<std::string> addresses, size_t index,
                                     std::optional<ShareLink> pairing, PairDone pair_done, std::string last_error,
                                     std::function<void(Status)> done, std::string path_kind) {
  if (index >= addresses.size()) {
    done(make_error(ErrorCode::kUnavailable, "cannot reach peer " + short_id(peer) + " at any of its addresses (" +
                                                 last_error + "); check that its yonderd runs and is reachable"));
    return;
  }
  auto next = [this, peer, addresses, index, pairing, pair_done, done, path_kind](const std::string& why) {
    dial_address(peer, addresses, index + 1, pairing, pair_done, addresses[index] + ": " + why, done, path_kind);
  };
  auto hp = split_host_port(addresses[index]);
  if (!hp) return next(hp.error().message());
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io);
  resolver->async_resolve(hp->first, hp->second, [this, resolver, peer, pairing, pair_done, done, next, path_kind,
                                                  address = addresses[index]](
                                                     boost::system::error_code ec,
                                                     asio::ip::tcp::resolver::results_type results) {
    if (ec) return next("cannot resolve: " + ec.message());
    auto sock = std::make_shared<asio::ip::tcp::socket>(io);
    auto timer = std::make_shared<asio::steady_timer>(io, config.connect_timeout);
    auto connected = std::make_shared<bool>(false);
    timer->async_wait([sock, connected](boost::system::error_code e) {
      if (e || *connected) return;
      boost::system::error_code ignored;
      sock->close(ignored);
    });
    asio::async_connect(*sock, results, [this, sock, connected, timer, peer, pairing, pair_done, done, next,
                                         address, path_kind](boost::system::error_code cec,
                                                             const asio::ip::tcp::endpoint&) {
      if (cec) {
        timer->cancel();
        count_handshake(path_kind, "connect");
        return next(cec == asio::error::operation_aborted ? "timed out" : cec.message());
      }
      *connected = true;
      // The same timer now bounds the handshake (start_dialer re-arms it).
      start_dialer(std::move(*sock), peer, pairing, pair_done, done, path_kind + " to " + address, address, timer);
    });
  });
}

void LinkService::Impl::start_dialer(asio::ip::tcp::socket socket, const PublicKeyBytes& peer,
                                     std::optional<ShareLink> pairing, PairDone pair_done,
                                     std::function<void(Status)> done, std::string path, std::string label,
                                     std::shared_ptr<asio::steady_timer> timer) {
  boost::system::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  auto chan = std::make_shared<TlsChannel>(std::move(socket), client_tls->native(), false);
  TlsContext::set_policy(chan->native_handle(), [peer](const PublicKeyBytes& key) {
    return key == peer ? KeyVerdict::kPinned : KeyVerdict::kReject;
  });
  std::weak_ptr<TlsChannel> weak_chan = chan;
  timer->expires_after(config.connect_timeout);
  timer->async_wait([weak_chan](boost::system::error_code e) {
    if (e) return;
    if (auto c = weak_chan.lock()) c->close();
  });
  chan->async_handshake([this, weak_chan, timer, peer, pairing, pair_done, done, path,
                         address = std::move(label)](boost::system::error_code hec) {
    auto live = weak_chan.lock();
    timer->cancel();
    if (!live) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
    if (hec) {
      live->close();
      bool wrong_key = TlsContext::peer_key(live->native_handle()).has_value() &&
                       TlsContext::verdict(live->native_handle()) == KeyVerdict::kReject;
      if (!stopped) {
        count_handshake(path, wrong_key ? "wrong_key" : hec == asio::error::operation_aborted ? "timeout" : "refused");
      }
      if (wrong_key) {
        spdlog::warn("link: {} answered with a different key than {}: refusing (man in the middle?)", address,
                     short_id(peer));
        return done(make_error(ErrorCode::kPermissionDenied,
                               address + " answered with a different key than the peer's; refusing to talk to "
                                         "it (a man in the middle, or another node on that address)"));
      }
      // The connection went before the handshake ended (the peer stopped,
      // the network broke): worth another try later.
      if (hec != asio::error::access_denied) {
        return done(make_error(ErrorCode::kUnavailable, "peer " + short_id(peer) + " at " + address +
                                                            " closed the connection during the handshake: " +
                                                            hec.message()));
      }
      // A TLS refusal: not permitted there. A deny ends retries (exit 5 in
      // the CLI) instead of being mistaken for a network that may come back.
      return done(make_error(ErrorCode::kPermissionDenied,
                             "peer " + short_id(peer) + " at " + address +
                                 " refused the connection: it does not accept this node (it may have denied it, "
                                 "or it has no valid share link for it)"));
    }
    auto session = std::make_shared<Session>(live, Role::kDialer, peer, KeyVerdict::kPinned, this, path, mux_config());
    Conn& c = conns[session.get()];
    c.session = session;
    c.dialed = true;
    c.waiters.push_back(done);
    if (pair_done) {
      c.pair_done = [pair_done](Result<PairResult> r) {
        if (!*pair_done) return;
        auto d = std::move(*pair_done);
        *pair_done = nullptr;
        d(std::move(r));
      };
    }
    c.establish_timer = std::make_unique<asio::steady_timer>(io, config.connect_timeout);
    std::weak_ptr<Session> weak = session;
    c.establish_timer->async_wait([weak](boost::system::error_code e) {
      auto s = weak.lock();
      if (!e && s && !s->established()) s->abort("the peer did not answer in time (it may have refused us)");
    });
    session->start();
    if (pairing) {
      send_control(c, {{"type", "pair"},
                       {"v", 1},
                       {"link_id", pairing->id_text()},
                       {"secret", base64_encode(pairing->secret)},
                       {"name", config.name}});
    } else {
      send_control(c, {{"type", "hello"}, {"v", 1}, {"name", config.name}});
    }
  });
}

void LinkService::on_established(std::function<void(const PublicKeyBytes&, const std::string&)> hook) {
  impl_->established_hook = std::move(hook);
}

void LinkService::set_carrier_dialer(CarrierDialer dialer, std::chrono::milliseconds head_start) {
  impl_->carrier_dialer = std::move(dialer);
  impl_->carrier_head_start = head_start;
}

void LinkService::accept_carrier(Carrier carrier, const PublicKeyBytes& peer) {
  asio::ip::tcp::socket socket(impl_->io);
  boost::system::error_code ec;
  socket.assign(asio::ip::tcp::v4(), carrier.fd, ec);
  if (ec) {
    ::close(carrier.fd);
    spdlog::warn("link: cannot use a carrier from {}: {}", short_id(peer), ec.message());
    return;
  }
  if (impl_->stopped) return;
  if (carrier.tls_client) {
    // We asked first (both sides dialled at once): our dial owns it.
    auto timer = std::make_shared<asio::steady_timer>(impl_->io);
    impl_->start_dialer(std::move(socket), peer, std::nullopt, nullptr, [](Status) {}, carrier.path, carrier.path,
                        timer);
    return;
  }
  impl_->start_acceptor(std::move(socket), carrier.path, peer, nullptr);
}

void LinkService::adopt_channel(std::shared_ptr<Channel> channel, const PublicKeyBytes& peer, bool dialer,
                                std::string path, std::function<void(Status)> done) {
  Impl& m = *impl_;
  auto fail = [&](const std::string& why) {
    channel->close();
    if (done) done(make_error(ErrorCode::kUnavailable, why));
  };
  if (m.stopped) return fail("the node is shutting down");
  if (m.policy.classify(peer) != KeyVerdict::kPinned) {
    m.count_handshake(path, "refused");
    return fail("peer " + short_id(peer) + " is not paired with this node: a " + path + " carrier is only for paired peers");
  }
  auto session = std::make_shared<Session>(std::move(channel), dialer ? Role::kDialer : Role::kAcceptor, peer,
                                           KeyVerdict::kPinned, &m, path, m.mux_config());
  Conn& c = m.conns[session.get()];
  c.session = session;
  c.dialed = dialer;
  c.tokens = m.config.rate_burst;
  c.refilled = m.steady_now();
  if (done) c.waiters.push_back(std::move(done));
  c.establish_timer = std::make_unique<asio::steady_timer>(m.io, m.config.connect_timeout);
  std::weak_ptr<Session> weak = session;
  c.establish_timer->async_wait([weak](boost::system::error_code e) {
    auto s = weak.lock();
    if (!e && s && !s->established()) s->abort("the peer did not answer on the new path in time");
  });
  session->start();
  m.send_control(c, {{"type", "hello"}, {"v", 1}, {"name", m.config.name}});
  if (!dialer) m.policy.seen(peer);
}

void LinkService::try_path(const PublicKeyBytes& peer, const std::string& address, const std::string& kind) {
  Impl& m = *impl_;
  if (m.stopped) return;
  Conn* best = m.find_established(peer);
  if (best != nullptr && path_rank(best->session->path()) <= path_rank(kind)) return;  // as good already
  auto key = std::make_pair(peer, address);
  if (!m.trying.insert(key).second) return;  // one attempt per address at a time
  spdlog::info("link: trying a {} path to {} at {}", kind, short_id(peer), address);
  m.dial_address(peer, {address}, 0, std::nullopt, nullptr, "", [this, key, kind](Status st) {
    impl_->trying.erase(key);
    if (!st) spdlog::info("link: the {} path to {} did not work: {}", kind, short_id(key.first), st.error().message());
  }, kind);
}

void LinkService::probe(const PublicKeyBytes& peer, const std::string& address, std::chrono::milliseconds within,
                        std::function<void(Status)> done) {
  Impl& m = *impl_;
  if (m.stopped) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
  auto hp = split_host_port(address);
  if (!hp) return done(hp.error());
  auto fail = [done](const std::string& why) { done(make_error(ErrorCode::kUnavailable, why)); };
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(m.io);
  resolver->async_resolve(hp->first, hp->second, [this, resolver, peer, within, done, fail](
                                                     boost::system::error_code ec,
                                                     asio::ip::tcp::resolver::results_type results) {
    if (ec) return fail("cannot resolve: " + ec.message());
    Impl& impl = *impl_;
    auto sock = std::make_shared<asio::ip::tcp::socket>(impl.io);
    auto timer = std::make_shared<asio::steady_timer>(impl.io, within);
    timer->async_wait([sock](boost::system::error_code e) {
      if (e) return;
      boost::system::error_code ignored;
      sock->close(ignored);
    });
    asio::async_connect(*sock, results, [this, sock, timer, peer, within, done, fail](
                                            boost::system::error_code cec, const asio::ip::tcp::endpoint&) {
      timer->cancel();
      if (cec) return fail(cec == asio::error::operation_aborted ? "timed out" : cec.message());
      Impl& in = *impl_;
      auto chan = std::make_shared<TlsChannel>(std::move(*sock), in.client_tls->native(), false);
      TlsContext::set_policy(chan->native_handle(), [peer](const PublicKeyBytes& key) {
        return key == peer ? KeyVerdict::kPinned : KeyVerdict::kReject;
      });
      auto bound = std::make_shared<asio::steady_timer>(in.io, within);
      std::weak_ptr<TlsChannel> weak = chan;
      bound->async_wait([weak](boost::system::error_code e) {
        if (e) return;
        if (auto c = weak.lock()) c->close();
      });
      chan->async_handshake([chan, bound, done, fail](boost::system::error_code hec) {
        bound->cancel();
        chan->close();
        if (hec) return fail("the TLS handshake with the peer's key did not complete: " + hec.message());
        done(ok_status());
      });
    });
  });
}

int path_rank(const std::string& path) {
  auto starts = [&](const char* p) { return path.rfind(p, 0) == 0; };
  if (starts("lan")) return 0;
  if (starts("direct")) return 1;
  if (starts("mapped")) return 2;
  if (starts("punched")) return 3;
  if (starts("relay")) return 4;
  return 1;
}

void LinkService::Impl::drain_worse(Conn& established) {
  const PublicKeyBytes& peer = established.session->peer();
  int rank = path_rank(established.session->path());
  // A session that came up after a better one (the relay half of a dial
  // race that the direct half won) is not kept idle next to it.
  for (auto& [ptr, c] : conns) {
    if (&c != &established && c.session->peer() == peer && !c.session->closed() && !c.session->draining() &&
        c.session->established() && c.session->verdict() == KeyVerdict::kPinned &&
        path_rank(c.session->path()) < rank) {
      spdlog::info("link: {} stays on {}; {} is not needed", short_id(peer), c.session->path(),
                   established.session->path());
      established.session->drain("a better path is up: " + c.session->path());
      return;
    }
  }
  for (auto& [ptr, c] : conns) {
    if (&c == &established || c.session->peer() != peer || c.session->closed() || c.session->draining() ||
        !c.session->established() || c.session->verdict() != KeyVerdict::kPinned) {
      continue;
    }
    if (path_rank(c.session->path()) > rank) {
      spdlog::info("link: {} moves from {} to {}", short_id(peer), c.session->path(), established.session->path());
      c.session->drain("moved to " + established.session->path());
    }
  }
}

void LinkService::Impl::mark_established(Conn& c) {
  if (c.session->established()) return;
  c.session->set_established();
  // A round trip measured at once, so a new session shows its RTT (in
  // `yonder peers`, in placement) without waiting for the first keepalive.
  c.session->measure_rtt();
  count_handshake(c.session->path(), "ok");
  if (c.establish_timer) c.establish_timer->cancel();
  policy.seen(c.session->peer());
  if (c.session->verdict() == KeyVerdict::kPinned) {
    drain_worse(c);
    if (established_hook) established_hook(c.session->peer(), c.session->path());
  }
  auto waiters = std::move(c.waiters);
  c.waiters.clear();
  for (auto& w : waiters) w(ok_status());
}

}  // namespace yonder::link
