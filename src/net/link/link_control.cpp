// The control stream (hello, pairing) and session events of LinkService.
#include <boost/asio/post.hpp>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include "net/link/link_service_impl.h"

namespace yonder::link {

void LinkService::Impl::on_mux_event(const std::shared_ptr<Session>& session, MuxEvent event) {
  Conn* c = conn_of(session);
  if (c == nullptr) return;
  std::visit(
      [&](auto&& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, StreamOpened>) {
          on_stream_opened(*c, e.id.value, static_cast<uint16_t>(e.kind));
        } else if constexpr (std::is_same_v<E, DataAvailable>) {
          if (e.id == wire::kControlStream) {
            Bytes b = session->mux().read(wire::kControlStream);
            c->control.feed(b);
            while (!session->closed()) {
              auto msg = c->control.next();
              if (!msg) {
                session->abort("peer broke the control protocol: " + msg.error().message());
                return;
              }
              if (!*msg) break;
              try {
                on_control_message(*c, std::move(**msg));
              } catch (const nlohmann::json::exception& wrong) {
                // A field of the wrong type (nlohmann's value() throws): the
                // peer broke the protocol, and the exception stays here.
                session->abort(std::string("peer broke the control protocol: ") + wrong.what());
                return;
              }
            }
          } else {
            on_stream_data(*c, e.id.value);
          }
        } else if constexpr (std::is_same_v<E, StreamClosed>) {
          on_stream_closed(*c, e.id.value);
        } else if constexpr (std::is_same_v<E, StreamReset>) {
          on_stream_reset(*c, e.id.value, e.reason.empty() ? "the peer reset the stream" : e.reason,
                          e.code == ResetCode::kRefused);
        } else if constexpr (std::is_same_v<E, StreamWritable>) {
          on_stream_writable(*c, e.id.value);
        } else if constexpr (std::is_same_v<E, GoAwayReceived>) {
          if (e.code == ResetCode::kPathMoved) {
            // The peer moved to a better path: finish what runs here.
            session->drain(e.reason.empty() ? "moved to a better path" : e.reason);
          } else {
            // The peer is leaving (or removed our access): end our side too.
            session->close(e.reason.empty() ? "the peer closed the link" : "the peer closed the link: " + e.reason);
          }
        } else {
          // PongReceived (the session keeps the RTT) and LinkError (the
          // session closes itself) need nothing more here.
        }
      },
      std::move(event));
  // The acceptor trusts a pinned dialer from its first valid frame: its key
  // was checked during the handshake, before any of its frames.
  if (!session->closed() && !session->established() && !c->dialed && session->verdict() == KeyVerdict::kPinned &&
      session->mux().peer_seen()) {
    mark_established(*c);
  }
}

void LinkService::Impl::on_control_message(Conn& c, nlohmann::json msg) {
  auto& s = c.session;
  std::string type = msg.value("type", "");
  if (type == "hello") {
    if (s->verdict() != KeyVerdict::kPinned) {
      s->abort("hello from a dialer that is not paired");
      return;
    }
    mark_established(c);
    return;
  }
  if (type == "pair" && !c.dialed) {
    // A known peer may pair again (a new link, a new scope); an unknown one
    // may do nothing else.
    auto id = parse_link_id(msg.value("link_id", ""));
    auto secret_bytes = base64_decode(msg.value("secret", ""));
    std::string name = msg.value("name", "");
    if (name.size() > 64) name.resize(64);
    if (!id || !secret_bytes || secret_bytes->size() != 32) {
      s->abort("malformed pairing request");
      return;
    }
    LinkSecret secret{};
    std::copy(secret_bytes->begin(), secret_bytes->end(), secret.begin());
    std::string sas = s->short_auth_string();
    auto r = policy.redeem(*id, secret, s->peer(), name, sas);
    if (!r) {
      if (r.error().code() == ErrorCode::kNotFound) {
        spdlog::warn("link: pairing attempt from {} with an unknown link or wrong secret: closed",
                     NodeId(s->peer()).short_form());
        s->abort("unknown link");
      } else {
        spdlog::warn("link: pairing from {} refused: {}", NodeId(s->peer()).short_form(), r.error().message());
        send_control(c, {{"type", "pair_error"}, {"message", r.error().message()}});
        s->close("pairing refused");
      }
      return;
    }
    s->set_verdict(KeyVerdict::kPinned);
    nlohmann::json ok = *r;
    ok["type"] = "pair_ok";
    ok["name"] = config.name;
    send_control(c, ok);
    mark_established(c);
    spdlog::info("link: paired with {} \"{}\"; short authentication string {}", NodeId(s->peer()).to_string(), name,
                 sas);
    return;
  }
  if (type == "pair_ok" && c.dialed && c.pair_done) {
    PairResult pr;
    pr.provider = s->peer();
    pr.provider_name = msg.value("name", "");
    pr.granted = msg.contains("scope") ? msg["scope"] : nlohmann::json::object();
    pr.short_auth_string = s->short_auth_string();
    pr.answer = msg;
    auto done = std::move(c.pair_done);
    c.pair_done = nullptr;
    mark_established(c);
    done(pr);
    return;
  }
  if (type == "pair_error" && c.dialed && c.pair_done) {
    auto done = std::move(c.pair_done);
    c.pair_done = nullptr;
    std::string message = msg.value("message", "the provider refused the pairing");
    if (message.size() > 300) message.resize(300);
    done(make_error(ErrorCode::kFailedPrecondition, message));
    s->close("pairing refused");
    return;
  }
  // Unknown control messages from a newer peer are ignored; from an
  // unauthenticated one they end the session.
  if (s->verdict() != KeyVerdict::kPinned) s->abort("unexpected control message");
}

void LinkService::Impl::on_session_closed(const std::shared_ptr<Session>& session, const std::string& why) {
  auto it = conns.find(session.get());
  if (it == conns.end()) return;
  Conn& c = it->second;
  std::string who = NodeId(session->peer()).short_form();
  spdlog::info("link: session with {} ({}) ended: {}", who, session->path(), why);
  Error err = make_error(ErrorCode::kUnavailable, "link to " + who + " closed: " + why);
  if (!session->established() && !stopped) {
    count_handshake(session->path(), session->verdict() == KeyVerdict::kPairingOnly ? "pairing" : "closed");
  }
  if (c.dialed && !session->established()) {
    err = make_error(ErrorCode::kPermissionDenied,
                     "peer " + who + " refused the connection: it does not accept this node (it may have denied it, "
                                     "or it has no valid share link for it)");
  }
  if (c.pair_done) {
    auto done = std::move(c.pair_done);
    c.pair_done = nullptr;
    done(make_error(ErrorCode::kUnavailable,
                    "the provider closed the connection without pairing: it does not know this link (or the secret "
                    "in it is wrong); ask the provider for a new link"));
  }
  auto waiters = std::move(c.waiters);
  c.waiters.clear();
  for (const auto& [id, st] : c.streams) {
    spdlog::debug("link: session with {} ended with stream {} (kind {}) open: {}", who, id, st.kind, why);
  }
  for (auto& w : waiters) w(err);
  for (auto& [id, st] : c.streams) {
    if (st.on_reply) {
      auto r = std::move(st.on_reply);
      st.on_reply = nullptr;
      r(err);
    }
    if (st.on_end) {
      auto e = std::move(st.on_end);
      st.on_end = nullptr;
      e(err.message());
    }
  }
  c.streams.clear();
  if (c.establish_timer) c.establish_timer->cancel();
  // A kept peer is redialled whichever side dialled the session that ended:
  // a punched path's QUIC channel is dialled by one side only, and when it
  // dies the other side may be the one that keeps the link.
  if ((c.dialed || session->established()) && keep.count(session->peer()) && !stopped) {
    schedule_redial(session->peer());
  }
  // Erase later: callers up the stack may still hold this Conn.
  asio::post(io, [this, key = session.get()] { conns.erase(key); });
}

void LinkService::keep_connected(const PublicKeyBytes& peer, const std::vector<std::string>& addresses) {
  auto& k = impl_->keep[peer];
  bool moved = !k.addresses.empty() && k.addresses != addresses;
  k.addresses = addresses;
  if (!k.timer) k.timer = std::make_unique<asio::steady_timer>(impl_->io);
  if (moved) {
    // New addresses (the peer moved): the backoff earned at the old ones
    // does not apply to them.
    k.failures = 0;
    k.timer->cancel();
  }
  if (impl_->find_established(peer) == nullptr && !k.dialing) impl_->redial(peer);
}

void LinkService::forget(const PublicKeyBytes& peer) { impl_->keep.erase(peer); }

void LinkService::Impl::redial(const PublicKeyBytes& peer) {
  auto it = keep.find(peer);
  if (it == keep.end() || stopped || find_established(peer) != nullptr) return;
  it->second.dialing = true;
  with_session(peer, it->second.addresses, [this, peer](Result<Conn*> conn) {
    auto k = keep.find(peer);
    if (k == keep.end()) return;
    k->second.dialing = false;
    if (conn) {
      k->second.failures = 0;
      return;
    }
    spdlog::info("link: cannot reach {}: {}", NodeId(peer).short_form(), conn.error().message());
    k->second.failures++;
    schedule_redial(peer);
  });
}

void LinkService::Impl::schedule_redial(const PublicKeyBytes& peer) {
  auto it = keep.find(peer);
  if (it == keep.end() || !it->second.timer || it->second.dialing) return;
  int f = std::min(it->second.failures, 7);
  auto base = std::chrono::milliseconds(500) * (1 << f);  // 0.5 s .. 64 s
  auto delay = std::min<std::chrono::milliseconds>(base, std::chrono::seconds(60));
  // Jitter (+0..25 %), so many consumers of one provider do not redial in step.
  delay += std::chrono::milliseconds(randombytes_uniform(static_cast<uint32_t>(delay.count() / 4 + 1)));
  it->second.timer->expires_after(delay);
  it->second.timer->async_wait([this, peer](boost::system::error_code ec) {
    if (!ec) redial(peer);
  });
}

}  // namespace yonder::link
