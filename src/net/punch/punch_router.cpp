#include "net/punch/punch_router.h"

namespace yonder::punch {

PunchRouter::PunchRouter(boost::asio::io_context& io, DatagramPort& port, const PublicKeyBytes& self, Hooks hooks)
    : io_(io), port_(port), self_(self), hooks_(std::move(hooks)) {}

PunchRouter::~PunchRouter() {
  stop();
}

std::shared_ptr<PunchSession> PunchRouter::make(const PublicKeyBytes& peer, Role role) {
  auto config = hooks_.config_for ? hooks_.config_for(peer) : std::nullopt;
  if (!config) return nullptr;
  config->role = role;
  config->self_key = self_;
  config->peer_key = peer;
  std::weak_ptr<bool> alive = alive_;
  // The outcome names the session it came from: a replaced session's is dropped.
  auto self_ref = std::make_shared<std::weak_ptr<PunchSession>>();
  auto session = PunchSession::create(
      io_, port_, std::move(*config),
      [this, alive, peer](Bytes b) {
        if (alive.lock() && hooks_.send_signal) hooks_.send_signal(peer, std::move(b));
      },
      [this, alive, peer, self_ref](const PunchOutcome& o) {
        if (!alive.lock()) return;
        auto it = sessions_.find(peer);
        if (it == sessions_.end() || it->second.session != self_ref->lock()) return;
        it->second.has_outcome = true;
        if (hooks_.done) hooks_.done(peer, o);
      },
      hooks_.random);
  *self_ref = session;
  sessions_[peer] = Entry{session, role, false};
  return session;
}

void PunchRouter::sweep() {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.session->finished() ? sessions_.erase(it) : std::next(it);
  }
}

void PunchRouter::punch(const PublicKeyBytes& peer) {
  sweep();
  if (punching(peer)) return;
  if (auto it = sessions_.find(peer); it != sessions_.end()) {
    it->second.session->cancel();
    sessions_.erase(it);
  }
  if (auto s = make(peer, Role::kInitiator)) s->start();
}

bool PunchRouter::on_signal(const PublicKeyBytes& peer, ByteView bytes) {
  if (!is_punch_signal(bytes)) return false;
  auto signal = decode_punch_signal(bytes);
  if (!signal) return true;  // malformed: the session (if any) times out with its own reason
  sweep();
  auto it = sessions_.find(peer);
  if (std::holds_alternative<Offer>(*signal)) {
    if (it != sessions_.end()) {
      Entry& e = it->second;
      if (e.role == Role::kResponder && !e.has_outcome) {
        e.session->on_signal(*signal);  // the initiator's retry
        return true;
      }
      // Glare: both started. The smaller key keeps initiating; the peer yields when our offer lands.
      if (e.role == Role::kInitiator && !e.has_outcome && initiator_is_self(self_, peer)) return true;
      e.session->cancel();
      sessions_.erase(it);
    }
    if (auto s = make(peer, Role::kResponder)) {
      s->start();
      s->on_signal(*signal);
    }
    return true;
  }
  if (it != sessions_.end()) it->second.session->on_signal(*signal);
  return true;
}

bool PunchRouter::on_datagram(const udp::endpoint& from, ByteView bytes) {
  auto p = decode_punch_packet(bytes);
  if (!p) return false;
  for (auto& [peer, e] : sessions_) {
    if (e.session->session() == p->session) return e.session->on_datagram(from, bytes);
  }
  return false;
}

void PunchRouter::cancel(const PublicKeyBytes& peer) {
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) return;
  it->second.session->cancel();
  sessions_.erase(it);
}

Result<udp::socket> PunchRouter::take_port(const PublicKeyBytes& peer, int via) {
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) return make_error(ErrorCode::kNotFound, "no punch session with that peer");
  return it->second.session->take_port(via);
}

bool PunchRouter::punching(const PublicKeyBytes& peer) const {
  auto it = sessions_.find(peer);
  return it != sessions_.end() && !it->second.has_outcome && !it->second.session->finished();
}

void PunchRouter::stop() {
  for (auto& [peer, e] : sessions_) e.session->cancel();
  sessions_.clear();
}

}  // namespace yonder::punch
