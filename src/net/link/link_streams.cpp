// Requests and byte streams of LinkService: RPC (one message each way),
// echo and discard (diagnostics: ping, speed test), and the public calls
// that use them.
#include <boost/asio/post.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "net/link/link_service_impl.h"

namespace yonder::link {
namespace {

constexpr size_t kReadChunk = 256 * 1024;

wire::StreamId sid(uint32_t id) { return wire::StreamId{id}; }

}  // namespace

bool LinkService::Impl::take_token(Conn& c) {
  auto now = steady_now();
  double elapsed = std::chrono::duration<double>(now - c.refilled).count();
  c.refilled = now;
  c.tokens = std::min(config.rate_burst, c.tokens + elapsed * config.rate_per_second);
  if (c.tokens < 1) return false;
  c.tokens -= 1;
  return true;
}

Result<uint32_t> LinkService::Impl::open(Conn& c, AppStreamKind kind) {
  auto id = c.session->mux().open_stream(static_cast<wire::StreamKind>(kind));
  if (!id) return std::move(id).error();
  StreamState& st = c.streams[id->value];
  st.kind = static_cast<uint16_t>(kind);
  st.local = true;
  return id->value;
}

void LinkService::Impl::send(Conn& c, uint32_t id, ByteView data, bool close_after) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  StreamState& st = it->second;
  st.close_after_out = st.close_after_out || close_after;
  if (st.out.empty() && !data.empty()) {
    // Straight into the mux; stage only what its window cannot take now.
    auto n = c.session->mux().write(sid(id), data);
    if (n) data = data.subspan(*n);
  }
  st.out.insert(st.out.end(), data.begin(), data.end());
  on_stream_writable(c, id);
}

void LinkService::Impl::on_stream_writable(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  StreamState& st = it->second;
  if (!st.out.empty()) {
    auto n = c.session->mux().write(sid(id), st.out);
    if (!n) return;
    st.out.erase(st.out.begin(), st.out.begin() + static_cast<long>(*n));
  }
  if (st.out.empty() && st.close_after_out) {
    st.close_after_out = false;
    (void)c.session->mux().close(sid(id));
  }
  if (st.out.empty() && st.on_writable) st.on_writable();
  // An echo stream stopped reading when it could not write; resume.
  if (st.kind == static_cast<uint16_t>(AppStreamKind::kEcho) && !st.local) on_stream_data(c, id);
  c.session->flush();
}

void LinkService::Impl::on_stream_opened(Conn& c, uint32_t id, uint16_t kind) {
  if (c.session->verdict() != KeyVerdict::kPinned) {
    c.session->abort("stream from a peer that is not paired");
    return;
  }
  bool known = kind == static_cast<uint16_t>(AppStreamKind::kRpc) ||
               kind == static_cast<uint16_t>(AppStreamKind::kEcho) ||
               kind == static_cast<uint16_t>(AppStreamKind::kDiscard) ||
               kind == static_cast<uint16_t>(AppStreamKind::kTunnel);
  if (!known) {
    (void)c.session->mux().reset(sid(id), wire::ResetCode::kRefused, "unknown stream kind");
    c.session->flush();
    return;
  }
  StreamState& st = c.streams[id];
  st.kind = kind;
  if (kind == static_cast<uint16_t>(AppStreamKind::kTunnel)) on_tunnel_opened(c, id);
}

void LinkService::Impl::on_stream_data(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) {
    (void)c.session->mux().read(sid(id));  // a stream we gave up on
    return;
  }
  StreamState& st = it->second;
  if (st.tunnel) return on_tunnel_data(c, id);
  Mux& mux = c.session->mux();
  if (st.local) {
    Bytes b = mux.read(sid(id));
    if (st.on_data) {
      st.on_data(st, b);
    } else {
      st.reader.feed(b);
    }
  } else if (st.kind == static_cast<uint16_t>(AppStreamKind::kRpc)) {
    st.reader.feed(mux.read(sid(id)));
    if (st.reader.buffered() > kMaxMessageBytes + 4) {
      (void)mux.reset(sid(id), wire::ResetCode::kProtocolError, "request too large");
      c.streams.erase(it);
    }
  } else if (st.kind == static_cast<uint16_t>(AppStreamKind::kEcho)) {
    // Read only what can be written back: a slow echo reader on the far side
    // then back-pressures this stream and no other.
    size_t room = mux.writable(sid(id));
    if (room > 0 && st.out.empty()) {
      Bytes b = mux.read(sid(id), std::min(room, kReadChunk));
      if (!b.empty()) send(c, id, b, false);
    }
  } else if (st.kind == static_cast<uint16_t>(AppStreamKind::kDiscard)) {
    while (mux.readable(sid(id)) > 0) st.counted += mux.read(sid(id), kReadChunk).size();
  }
  c.session->flush();
}

void LinkService::Impl::on_stream_closed(Conn& c, uint32_t id) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  StreamState& st = it->second;
  if (st.tunnel) return on_tunnel_closed(c, id);
  if (st.local) {
    if (st.on_reply) {
      auto msg = st.reader.next();
      auto reply = std::move(st.on_reply);
      c.streams.erase(it);
      if (!msg) return reply(std::move(msg).error());
      if (!*msg) return reply(make_error(ErrorCode::kUnavailable, "the peer closed the request without a reply"));
      const nlohmann::json& m = **msg;
      if (m.contains("error") && m["error"].is_string()) {
        std::string name = m.value("code", "");
        ErrorCode code = error_code_from_name(name);
        return reply(make_error(code, m["error"].get<std::string>()));
      }
      return reply(m.contains("result") ? m["result"] : nlohmann::json::object());
    }
    if (st.on_remote_close) {
      auto cb = std::move(st.on_remote_close);
      c.streams.erase(it);
      cb();
      return;
    }
    c.streams.erase(it);
    return;
  }
  if (st.kind == static_cast<uint16_t>(AppStreamKind::kRpc)) {
    auto msg = st.reader.next();
    if (!msg || !*msg) {
      (void)c.session->mux().reset(sid(id), wire::ResetCode::kProtocolError, "malformed request");
      c.streams.erase(it);
      c.session->flush();
      return;
    }
    handle_rpc(c, id, std::move(**msg));
  } else if (st.kind == static_cast<uint16_t>(AppStreamKind::kDiscard)) {
    send(c, id, encode_message({{"bytes", st.counted}}), true);
    c.streams.erase(id);
  } else {
    st.close_after_out = true;
    on_stream_writable(c, id);
    if (st.out.empty()) c.streams.erase(id);
  }
}

void LinkService::Impl::on_stream_reset(Conn& c, uint32_t id, const std::string& reason, bool refused) {
  auto it = c.streams.find(id);
  if (it == c.streams.end()) return;
  StreamState st = std::move(it->second);
  c.streams.erase(it);
  if (refused && st.resend) {
    // Not handled at all (the peer is leaving this session): safe to send
    // again, and the caller never sees the move. Posted: we are inside the
    // session's event loop.
    asio::post(io, std::move(st.resend));
    return;
  }
  if (st.on_reply) st.on_reply(make_error(ErrorCode::kUnavailable, "request stream reset by the peer: " + reason));
  if (st.on_end) st.on_end(reason);
}

void LinkService::Impl::handle_rpc(Conn& c, uint32_t id, const nlohmann::json& request) {
  PublicKeyBytes peer = c.session->peer();
  std::weak_ptr<Session> weak = c.session;
  auto reply = [this, weak, id](Result<nlohmann::json> r) {
    auto s = weak.lock();
    if (!s || s->closed()) return;
    Conn* conn = conn_of(s);
    if (conn == nullptr) return;
    nlohmann::json msg;
    if (r) {
      msg = {{"result", *r}};
    } else {
      msg = {{"error", r.error().message()}, {"code", error_code_name(r.error().code())}};
    }
    conn->streams[id].kind = static_cast<uint16_t>(AppStreamKind::kRpc);
    send(*conn, id, encode_message(msg), true);
    conn->streams.erase(id);
  };
  // The peer's bytes: a "method" that is not a string is no method.
  auto named = request.is_object() ? request.find("method") : request.end();
  std::string method = named != request.end() && named->is_string() ? named->get<std::string>() : "";
  if (!take_token(c)) {
    return reply(make_error(ErrorCode::kResourceExhausted, "too many requests from this node; slow down"));
  }
  // Authorisation on every request, against the peer's scope as it is now,
  // before anything else about the request is looked at.
  if (auto st = policy.authorize(peer, method); !st) return reply(std::move(st).error());
  auto handler = methods.find(method);
  if (handler == methods.end()) {
    return reply(make_error(ErrorCode::kInvalidArgument, "the provider does not support \"" + method.substr(0, 64) +
                                                             "\" (is it an older yonder?)"));
  }
  // A handler reads the peer's params, which may be anything, and nlohmann
  // throws on a wrong type (value() of a string as a number, or of an array).
  // Nothing may leave the event loop by an exception: a throw while the
  // handler reads the request is the peer's malformed request, answered once.
  auto replied = std::make_shared<bool>(false);
  RpcReply once = [reply, replied](Result<nlohmann::json> r) {
    if (*replied) return;
    *replied = true;
    reply(std::move(r));
  };
  try {
    handler->second(peer, request.contains("params") ? request["params"] : nlohmann::json::object(), once);
  } catch (const nlohmann::json::exception& e) {
    once(make_error(ErrorCode::kInvalidArgument,
                    "malformed \"" + method.substr(0, 64) + "\" request: " + std::string(e.what()).substr(0, 160)));
  }
}

// --- public calls ---

void LinkService::pair(const ShareLink& link, std::function<void(Result<PairResult>)> done) {
  auto pair_done = std::make_shared<std::function<void(Result<PairResult>)>>(std::move(done));
  impl_->dial(link.provider_key, link.addresses, link, pair_done, [pair_done](Status st) {
    // Failures before a session existed (unreachable, refused, wrong key).
    if (st || !*pair_done) return;
    auto d = std::move(*pair_done);
    *pair_done = nullptr;
    Error e = std::move(st).error();
    // A refusal (not a wrong key, which says so itself): in pairing terms.
    if ((e.code() == ErrorCode::kFailedPrecondition || e.code() == ErrorCode::kPermissionDenied) &&
        e.message().find("refused the connection") != std::string::npos) {
      e = make_error(ErrorCode::kFailedPrecondition,
                     "the provider refused the connection: this link is no longer valid there (all its links have "
                     "expired), or it has denied this node; ask the provider for a new link");
    }
    d(std::move(e));
  });
}

void LinkService::call(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                       const std::string& method, const nlohmann::json& params,
                       std::function<void(Result<nlohmann::json>)> done) {
  call_attempt(peer, addresses, method, params, std::move(done), 0);
}

void LinkService::call_attempt(const PublicKeyBytes& peer, const std::vector<std::string>& addresses,
                               const std::string& method, const nlohmann::json& params,
                               std::function<void(Result<nlohmann::json>)> done, int attempt) {
  Impl* impl = impl_.get();
  impl->with_session(peer, addresses, [this, impl, peer, addresses, method, params, done, attempt](Result<Conn*> conn) {
    if (!conn) return done(std::move(conn).error());
    Conn& c = **conn;
    auto id = impl->open(c, AppStreamKind::kRpc);
    if (!id) return done(std::move(id).error());
    // A reply that never comes fails the call instead of hanging it.
    auto timer = std::make_shared<asio::steady_timer>(impl->io, impl->config.request_timeout);
    c.streams[*id].on_reply = [timer, done](Result<nlohmann::json> r) {
      timer->cancel();
      done(std::move(r));
    };
    if (attempt < 3) {
      c.streams[*id].resend = [this, timer, peer, addresses, method, params, done, attempt] {
        timer->cancel();
        call_attempt(peer, addresses, method, params, done, attempt + 1);
      };
    }
    impl->send(c, *id, encode_message({{"method", method}, {"params", params}}), true);
    std::weak_ptr<Session> weak = c.session;
    uint32_t sid = *id;
    timer->async_wait([impl, weak, sid, method](boost::system::error_code ec) {
      auto s = weak.lock();
      Conn* cc = s ? impl->conn_of(s) : nullptr;
      if (ec || cc == nullptr) return;
      auto it = cc->streams.find(sid);
      if (it == cc->streams.end() || !it->second.on_reply) return;
      auto reply = std::move(it->second.on_reply);
      cc->streams.erase(it);
      (void)s->mux().reset(wire::StreamId{sid}, wire::ResetCode::kTimeout, "no reply in time");
      s->flush();
      reply(make_error(ErrorCode::kUnavailable, "the peer did not answer \"" + method + "\" within " +
                                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                            impl->config.request_timeout).count()) +
                                         " s; it may be stopped or overloaded"));
    });
  });
}

void LinkService::ping(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, int count,
                       std::chrono::milliseconds interval, std::function<void(std::chrono::nanoseconds)> progress,
                       std::function<void(Status)> done) {
  Impl* impl = impl_.get();
  impl->with_session(peer, addresses, [impl, count, interval, progress, done](Result<Conn*> conn) {
    if (!conn) return done(std::move(conn).error());
    Conn& c = **conn;
    auto id = impl->open(c, AppStreamKind::kEcho);
    if (!id) return done(std::move(id).error());
    struct PingState {
      int sent = 0;
      Clock::time_point sent_at;
      Bytes got;
      asio::steady_timer timer;
      bool finished = false;
      explicit PingState(asio::io_context& io) : timer(io) {}
    };
    auto state = std::make_shared<PingState>(impl->io);
    std::weak_ptr<Session> weak = c.session;
    uint32_t sid = *id;
    auto finish = [state, done](Status st) {
      if (state->finished) return;
      state->finished = true;
      state->timer.cancel();
      done(std::move(st));
    };
    auto send_one = [impl, weak, sid, state]() {
      auto s = weak.lock();
      Conn* cc = s ? impl->conn_of(s) : nullptr;
      if (cc == nullptr || s->closed()) return;
      Bytes probe(8);
      uint64_t seq = static_cast<uint64_t>(state->sent);
      for (int i = 0; i < 8; ++i) probe[i] = static_cast<uint8_t>(seq >> (8 * (7 - i)));
      state->sent++;
      state->sent_at = Clock::now();
      impl->send(*cc, sid, probe, false);
    };
    StreamState& st = c.streams[sid];
    st.on_data = [impl, weak, sid, state, count, interval, progress, send_one, finish](StreamState&, ByteView b) {
      state->got.insert(state->got.end(), b.begin(), b.end());
      while (state->got.size() >= 8) {
        state->got.erase(state->got.begin(), state->got.begin() + 8);
        progress(Clock::now() - state->sent_at);
        if (state->sent >= count) {
          auto s = weak.lock();
          Conn* cc = s ? impl->conn_of(s) : nullptr;
          if (cc != nullptr) impl->send(*cc, sid, {}, true);
          finish(ok_status());
          return;
        }
        state->timer.expires_after(interval);
        state->timer.async_wait([send_one](boost::system::error_code ec) {
          if (!ec) send_one();
        });
      }
    };
    st.on_end = [finish](const std::string& why) {
      finish(make_error(ErrorCode::kUnavailable, "the ping stream ended: " + why));
    };
    st.on_remote_close = [finish] { finish(make_error(ErrorCode::kUnavailable, "the peer closed the ping stream")); };
    send_one();
  });
}

void LinkService::speed_test(const PublicKeyBytes& peer, const std::vector<std::string>& addresses, uint64_t bytes,
                             int streams, std::function<void(Result<uint64_t>)> done) {
  Impl* impl = impl_.get();
  streams = std::max(1, std::min(streams, 64));
  impl->with_session(peer, addresses, [impl, bytes, streams, done](Result<Conn*> conn) {
    if (!conn) return done(std::move(conn).error());
    Conn& c = **conn;
    struct Shared {
      int open = 0;
      uint64_t counted = 0;
      bool failed = false;
      std::function<void(Result<uint64_t>)> done;
    };
    auto shared = std::make_shared<Shared>();
    shared->done = done;
    static const Bytes kBlock(64 * 1024, 0x5a);
    std::weak_ptr<Session> weak = c.session;
    for (int i = 0; i < streams; ++i) {
      auto id = impl->open(c, AppStreamKind::kDiscard);
      if (!id) return done(std::move(id).error());
      uint32_t sid = *id;
      auto left = std::make_shared<uint64_t>(bytes / static_cast<uint64_t>(streams) +
                                             (i == 0 ? bytes % static_cast<uint64_t>(streams) : 0));
      shared->open++;
      StreamState& st = c.streams[sid];
      // Keep at most one block queued per stream: refill when it drains.
      st.on_writable = [impl, weak, sid, left]() {
        auto s = weak.lock();
        Conn* cc = s ? impl->conn_of(s) : nullptr;
        if (cc == nullptr || *left == 0) return;
        size_t n = static_cast<size_t>(std::min<uint64_t>(*left, kBlock.size()));
        *left -= n;
        impl->send(*cc, sid, ByteView(kBlock.data(), n), *left == 0);
      };
      st.on_remote_close = [shared, impl, weak, sid]() mutable { (void)impl; (void)weak; (void)sid; };
      st.on_data = [shared](StreamState& self, ByteView b) {
        self.reader.feed(b);
        auto msg = self.reader.next();
        if (!msg || !*msg) return;
        shared->counted += (**msg).value("bytes", uint64_t{0});
        if (--shared->open == 0 && !shared->failed) shared->done(shared->counted);
      };
      st.on_end = [shared](const std::string& why) {
        if (shared->failed) return;
        shared->failed = true;
        shared->done(make_error(ErrorCode::kUnavailable, "speed test stream ended: " + why));
      };
      if (*left == 0) {
        impl->send(c, sid, {}, true);
      } else {
        st.on_writable();
      }
    }
  });
}

}  // namespace yonder::link
