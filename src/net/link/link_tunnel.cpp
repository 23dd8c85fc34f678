// Tunnel requests: a request answered with a two-way byte pipe, for port
// forwarding, uploads and interactive exec. The caller opens a stream of kind
// kTunnel and writes one request message ({"method", "params"}, as on an RPC
// stream), then waits. The acceptor authorises the method against the
// caller's current scope and rate budget exactly like an RPC and hands the
// request to the method's handler, which answers once, now or later, with
// one message ({"result"} or {"error", "code"}). An error closes the stream;
// a result turns it into a raw byte pipe both ways until each side
// half-closes (or either resets).
//
// Flow control is the mux's per-stream window, end to end: a Tunnel hands
// out one chunk at a time and reads nothing more until its user calls
// resume(), so a slow local socket closes the peer's window instead of
// growing a buffer here. Bytes the caller sends before the answer wait in
// the mux (within the window) until the handler has answered.
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "net/link/link_service_impl.h"

namespace yonder::link {
namespace {

constexpr size_t kLinkTunnelReadChunk = 64 * 1024;

wire::StreamId link_tunnel_sid(uint32_t id) {
  return wire::StreamId{id};
}

Error reply_error(const nlohmann::json& m) {
  std::string name = m.value("code", "");
  ErrorCode code = error_code_from_name(name);
  return make_error(code, m["error"].get<std::string>());
}

Bytes error_message(const Error& e) {
  return encode_message({{"error", e.message()}, {"code", error_code_name(e.code())}});
}

}  // namespace

struct TunnelState {
  bool local = false;    // we opened it (caller side)
  bool open = false;     // answered with a result: raw bytes from here on
  bool pending = false;  // acceptor: the handler has not answered yet
  bool dead = false;     // reset, refused or the link is gone
  std::string dead_reason;
  Bytes head;   // the request (acceptor) or answer (caller) until it is whole
  Bytes early;  // raw bytes that arrived with it
  bool started = false, paused = false, delivering = false;
  bool remote_eof = false, eof_delivered = false;
  bool write_blocked = false, closed_local = false;
  Tunnel::Handlers handlers;
  std::function<void(Result<TunnelOpened>)> opened;  // caller, until answered
};

struct LinkService::Impl::TunnelEnd final : Tunnel {
  TunnelEnd(Impl* impl, std::weak_ptr<Session> session, uint32_t id, std::shared_ptr<TunnelState> state)
      : impl_(impl), session_(std::move(session)), id_(id), st_(std::move(state)) {}

  ~TunnelEnd() override {
    if (st_->dead) return;
    if (st_->closed_local && st_->eof_delivered) {
      forget_if_done();
    } else {
      reset("the tunnel was dropped");
    }
  }

  void start(Handlers handlers) override {
    st_->handlers = std::move(handlers);
    st_->started = true;
    // Deliver from the loop, never from inside the caller's own callback.
    asio::post(impl_->io, [impl = impl_, weak = session_, id = id_, st = st_] {
      if (st->dead) {
        if (st->handlers.ended) st->handlers.ended(st->dead_reason);
        return;
      }
      auto s = weak.lock();
      Conn* c = s ? impl->conn_of(s) : nullptr;
      if (c != nullptr) impl->on_tunnel_data(*c, id);
    });
  }

  bool write(ByteView bytes) override {
    Conn* c = conn();
    if (c == nullptr || st_->closed_local) return true;  // ended() says why
    impl_->send(*c, id_, bytes, false);
    auto it = c->streams.find(id_);
    st_->write_blocked = it != c->streams.end() && !it->second.out.empty();
    return !st_->write_blocked;
  }

  void resume() override {
    st_->paused = false;
    if (st_->delivering) return;  // the delivery loop goes on
    if (Conn* c = conn()) impl_->on_tunnel_data(*c, id_);
  }

  void close() override {
    Conn* c = conn();
    if (c == nullptr || st_->closed_local) return;
    st_->closed_local = true;
    impl_->send(*c, id_, {}, true);
    forget_if_done();
  }

  void reset(const std::string& reason) override {
    Conn* c = conn();
    if (st_->dead) return;
    st_->dead = true;
    st_->dead_reason = reason;
    if (c == nullptr) return;
    c->streams.erase(id_);
    auto s = session_.lock();
    (void)s->mux().reset(link_tunnel_sid(id_), wire::ResetCode::kCancel, reason);
    s->flush();
  }

  // Both halves done and nothing left to send: drop our stream record (the
  // mux drops its own). Posted: callers may be inside a stream callback.
  void forget_if_done() {
    asio::post(impl_->io, [impl = impl_, weak = session_, id = id_, st = st_] {
      auto s = weak.lock();
      Conn* c = s ? impl->conn_of(s) : nullptr;
      if (c == nullptr) return;
      auto it = c->streams.find(id);
      if (it == c->streams.end() || it->second.tunnel != st) return;
      if (st->closed_local && st->eof_delivered && it->second.out.empty() && !it->second.close_after_out) {
        c->streams.erase(it);
      }
    });
  }

  Conn* conn() {
    if (st_->dead) return nullptr;
    auto s = session_.lock();
    Conn* c = s ? impl_->conn_of(s) : nullptr;
    if (c == nullptr) return nullptr;
    auto it = c->streams.find(id_);
    return it != c->streams.end() && it->second.tunnel == st_ ? c : nullptr;
  }

  Impl* impl_;
  std::weak_ptr<Session> session_;
  uint32_t id_;
  std::shared_ptr<TunnelState> st_;
};

namespace {

// What both sides do when the stream dies under them.
void arm_end(StreamState& ss, const std::shared_ptr<TunnelState>& st) {
  ss.on_end = [st](const std::string& why) {
    if (st->dead || (st->closed_local && st->eof_delivered)) return;  // over already
    st->dead = true;
    st->dead_reason = why;
    if (st->opened) {
      auto done = std::move(st->opened);
      st->opened = nullptr;
      return done(make_error(ErrorCode::kUnavailable, "the tunnel stream ended: " + why));
    }
    if (st->started && st->handlers.ended) st->handlers.ended(why);
  };
  ss.on_writable = [st] {
    if (!st->write_blocked || !st->started || st->dead) return;
    st->write_blocked = false;
    if (st->handlers.drained) st->handlers.drained();
  };
}

}  // namespace

void LinkService::add_tunnel_method(const std::string& method, TunnelHandler handler) {
  impl_->tunnel_methods[method] = std::move(handler);
}

void LinkService::Impl::on_tunnel_opened(Conn& c, uint32_t id) {
  StreamState& ss = c.streams[id];
  ss.tunnel = std::make_shared<TunnelState>();
  arm_end(ss, ss.tunnel);
}

void LinkService::Impl::on_tunnel_data(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  std::shared_ptr<TunnelState> st = it->second.tunnel;
  std::shared_ptr<Session> session = c.session;
  Mux& mux = session->mux();
  if (st->dead) {
    while (!mux.read(link_tunnel_sid(id), kLinkTunnelReadChunk).empty()) {
    }
    session->flush();
    return;
  }
  if (!st->open) {
    if (st->pending) return;  // the handler decides; the bytes wait in the mux
    for (Bytes b = mux.read(link_tunnel_sid(id), kLinkTunnelReadChunk); !b.empty(); b = mux.read(link_tunnel_sid(id), kLinkTunnelReadChunk)) {
      st->head.insert(st->head.end(), b.begin(), b.end());
      if (st->head.size() >= 4 + kMaxMessageBytes) break;
    }
    session->flush();
    if (st->head.size() < 4) return;
    size_t len = 0;
    for (size_t i = 0; i < 4; ++i) len = (len << 8) | st->head[i];
    if (len > kMaxMessageBytes) {
      st->dead = true;
      c.streams.erase(id);
      (void)mux.reset(link_tunnel_sid(id), wire::ResetCode::kProtocolError, "tunnel message too large");
      session->flush();
      if (st->opened) st->opened(make_error(ErrorCode::kUnavailable, "the provider sent a malformed tunnel answer"));
      return;
    }
    if (st->head.size() < 4 + len) return;
    auto msg =
        nlohmann::json::parse(st->head.begin() + 4, st->head.begin() + 4 + static_cast<long>(len), nullptr, false);
    st->early.assign(st->head.begin() + 4 + static_cast<long>(len), st->head.end());
    st->head.clear();
    st->head.shrink_to_fit();
    if (st->local) {
      // The answer to our request.
      auto done = std::move(st->opened);
      st->opened = nullptr;
      if (!msg.is_object() || (msg.contains("error") && msg["error"].is_string())) {
        Error e = msg.is_object() ? reply_error(msg)
                                  : make_error(ErrorCode::kUnavailable, "the provider sent a malformed tunnel answer");
        st->dead = true;
        c.streams.erase(id);
        (void)mux.reset(link_tunnel_sid(id), wire::ResetCode::kCancel, "refused");
        session->flush();
        if (done) done(std::move(e));
        return;
      }
      st->open = true;
      auto end = std::make_shared<TunnelEnd>(this, session, id, st);
      if (done) done(TunnelOpened{msg.contains("result") ? msg["result"] : nlohmann::json::object(), end});
      return;  // delivery starts with start()
    }
    // A request: authorised like an RPC, before anything else is looked at.
    auto refuse = [&](Error e) {
      st->dead = true;
      send(c, id, error_message(e), true);
      session->flush();
    };
    if (!msg.is_object() || !msg.contains("method") || !msg["method"].is_string()) {
      st->dead = true;
      c.streams.erase(id);
      (void)mux.reset(link_tunnel_sid(id), wire::ResetCode::kProtocolError, "malformed tunnel request");
      session->flush();
      return;
    }
    std::string method = msg["method"];
    PublicKeyBytes peer = session->peer();
    if (!take_token(c))
      return refuse(make_error(ErrorCode::kResourceExhausted, "too many requests from this node; slow down"));
    if (auto ok = policy.authorize(peer, method); !ok) return refuse(std::move(ok).error());
    auto handler = tunnel_methods.find(method);
    if (handler == tunnel_methods.end()) {
      return refuse(make_error(ErrorCode::kInvalidArgument, "the provider does not support \"" + method.substr(0, 64) +
                                                                "\" (is it an older yonder?)"));
    }
    st->pending = true;
    std::weak_ptr<Session> weak = session;
    TunnelAccept accept = [this, weak, id, st](Result<nlohmann::json> r) -> std::shared_ptr<Tunnel> {
      auto s = weak.lock();
      Conn* cc = s ? conn_of(s) : nullptr;
      if (cc == nullptr || st->dead || !st->pending) return nullptr;
      auto found = cc->streams.find(id);
      if (found == cc->streams.end() || found->second.tunnel != st) return nullptr;
      st->pending = false;
      if (!r) {
        st->dead = true;
        send(*cc, id, error_message(r.error()), true);
        s->flush();
        return nullptr;
      }
      st->open = true;
      send(*cc, id, encode_message({{"result", *r}}), false);
      s->flush();
      return std::make_shared<TunnelEnd>(this, s, id, st);
    };
    handler->second(peer, msg.contains("params") ? msg["params"] : nlohmann::json::object(), std::move(accept));
    return;
  }
  // An open pipe: one chunk at a time, the next after resume().
  if (!st->started || st->delivering) return;
  st->delivering = true;
  while (!st->paused && !st->dead) {
    Bytes b;
    if (!st->early.empty()) {
      b.swap(st->early);
    } else {
      b = mux.read(link_tunnel_sid(id), kLinkTunnelReadChunk);
    }
    if (b.empty()) break;
    st->paused = true;
    if (st->handlers.data) st->handlers.data(std::move(b));
  }
  st->delivering = false;
  if (!st->paused && !st->dead && st->remote_eof && !st->eof_delivered && st->early.empty() &&
      mux.readable(link_tunnel_sid(id)) == 0) {
    st->eof_delivered = true;
    if (st->handlers.eof) st->handlers.eof();
    if (st->closed_local && !st->dead) {
      // Both halves are done: drop the record (posted; we may be in a callback).
      asio::post(io, [this, weak = std::weak_ptr<Session>(session), id, st] {
        auto s = weak.lock();
        Conn* cc = s ? conn_of(s) : nullptr;
        if (cc == nullptr) return;
        auto f = cc->streams.find(id);
        if (f != cc->streams.end() && f->second.tunnel == st && f->second.out.empty() && !f->second.close_after_out) {
          cc->streams.erase(f);
        }
      });
    }
  }
  session->flush();
}

void LinkService::Impl::on_tunnel_closed(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  std::shared_ptr<TunnelState> st = it->second.tunnel;
  st->remote_eof = true;
  if (st->dead) {
    // Refused, or given up on: our half was closed or reset already.
    if (it->second.out.empty()) c.streams.erase(it);
    return;
  }
  if (st->open) return on_tunnel_data(c, id);
  if (st->pending) return;  // the handler answers first; eof follows once open
  // Closed before the request or answer was whole.
  st->dead = true;
  auto done = std::move(st->opened);
  st->opened = nullptr;
  c.streams.erase(it);
  (void)c.session->mux().reset(link_tunnel_sid(id), wire::ResetCode::kProtocolError, "tunnel closed before its request");
  c.session->flush();
  if (done) done(make_error(ErrorCode::kUnavailable, "the provider closed the tunnel without an answer"));
}

void LinkService::open_tunnel(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                              const std::string& method, const nlohmann::json& params,
                              std::function<void(Result<TunnelOpened>)> done) {
  Impl* impl = impl_.get();
  impl->with_session(peer, addresses, [impl, method, params, done](Result<Conn*> conn) {
    if (!conn) return done(std::move(conn).error());
    Conn& c = **conn;
    auto id = impl->open(c, AppStreamKind::kTunnel);
    if (!id) return done(std::move(id).error());
    StreamState& ss = c.streams[*id];
    auto st = std::make_shared<TunnelState>();
    st->local = true;
    ss.tunnel = st;
    arm_end(ss, st);
    // An answer that never comes fails the call instead of hanging it.
    auto timer = std::make_shared<asio::steady_timer>(impl->io, impl->config.request_timeout);
    st->opened = [timer, done](Result<TunnelOpened> r) {
      timer->cancel();
      done(std::move(r));
    };
    std::weak_ptr<Session> weak = c.session;
    uint32_t stream = *id;
    timer->async_wait([impl, weak, stream, st, method](boost::system::error_code ec) {
      if (ec || !st->opened) return;
      auto answer = std::move(st->opened);
      st->opened = nullptr;
      st->dead = true;
      auto s = weak.lock();
      Conn* cc = s ? impl->conn_of(s) : nullptr;
      if (cc != nullptr) {
        cc->streams.erase(stream);
        (void)s->mux().reset(link_tunnel_sid(stream), wire::ResetCode::kTimeout, "no answer in time");
        s->flush();
      }
      answer(make_error(ErrorCode::kUnavailable, "the peer did not answer \"" + method + "\" within " +
                                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                            impl->config.request_timeout).count()) +
                                         " s; it may be stopped or overloaded"));
    });
    impl->send(c, stream, encode_message({{"method", method}, {"params", params}}), false);
  });
}

}  // namespace yonder::link
