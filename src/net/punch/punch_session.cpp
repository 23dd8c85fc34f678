#include "net/punch/punch_session.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <openssl/rand.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>

namespace yonder::punch {
namespace {

uint64_t random_session() {
  uint64_t v = 0;
  if (RAND_bytes(reinterpret_cast<uint8_t*>(&v), sizeof(v)) != 1) std::abort();  // no randomness: nothing is safe
  return v;
}

MonoTime now() {
  return std::chrono::steady_clock::now();
}

}  // namespace

struct PunchSession::Timer {
  explicit Timer(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

PunchSession::PunchSession(boost::asio::io_context& io, DatagramPort& port, PuncherConfig config,
                           SignalSender send_signal, Done done, std::function<uint64_t()> random)
    : io_(io),
      port_(port),
      core_(std::move(config), random ? std::move(random) : std::function<uint64_t()>(random_session)),
      send_signal_(std::move(send_signal)),
      done_(std::move(done)),
      timer_(std::make_unique<Timer>(io)) {}

PunchSession::~PunchSession() {
  close_ports(0);
}

std::shared_ptr<PunchSession> PunchSession::create(boost::asio::io_context& io, DatagramPort& port,
                                                   PuncherConfig config, SignalSender send_signal, Done done,
                                                   std::function<uint64_t()> random) {
  return std::shared_ptr<PunchSession>(
      new PunchSession(io, port, std::move(config), std::move(send_signal), std::move(done), std::move(random)));
}

void PunchSession::start() {
  core_.start(now());
  pump();
}

void PunchSession::on_signal(const PunchSignal& signal) {
  core_.on_signal(now(), signal);
  pump();
}

bool PunchSession::on_datagram(const udp::endpoint& from, ByteView bytes) {
  bool mine = core_.on_datagram(now(), from, bytes);
  if (mine) pump();
  return mine;
}

void PunchSession::cancel() {
  done_ = nullptr;
  core_.cancel(now());
  timer_->timer.cancel();
  close_ports(0);
}

Result<udp::socket> PunchSession::take_port(int via) {
  auto it = ports_.find(via);
  if (via <= 0 || it == ports_.end()) {
    return make_error(ErrorCode::kNotFound, "birthday port " + std::to_string(via) + " is not open");
  }
  auto socket = it->second->release();
  ports_.erase(it);
  return socket;
}

// Opens birthday port `via` on first use; null when the system refuses a
// socket (too many open files): that probe is not sent.
DatagramPort* PunchSession::birthday_port(int via) {
  if (auto it = ports_.find(via); it != ports_.end()) return it->second.get();
  auto opened = UdpDatagramPort::open(io_, udp::endpoint(birthday_address_, 0));
  if (!opened) {
    ++ports_refused_;
    return nullptr;
  }
  auto& port = ports_[via] = std::move(*opened);
  std::weak_ptr<PunchSession> weak = weak_from_this();
  port->start([weak, via](const udp::endpoint& from, ByteView bytes) {
    auto s = weak.lock();
    if (!s || classify_datagram(bytes) != DatagramKind::kPunch) return;
    if (s->core_.on_datagram(now(), from, bytes, via)) s->pump();
  });
  return port.get();
}

// Closes every birthday port but `keep` (0: all).
void PunchSession::close_ports(int keep) {
  for (auto it = ports_.begin(); it != ports_.end();) {
    if (it->first == keep) {
      ++it;
      continue;
    }
    it->second->close();
    it = ports_.erase(it);
  }
}

void PunchSession::pump() {
  auto self = shared_from_this();  // `done` may drop the owner's reference
  for (auto& d : core_.take_datagrams()) {
    if (d.via == 0) {
      port_.send_to(d.to, d.bytes, d.ttl);
    } else if (auto* p = birthday_port(d.via)) {
      p->send_to(d.to, d.bytes, d.ttl);
    }
  }
  for (auto& s : core_.take_signals()) {
    if (send_signal_) send_signal_(std::move(s));
  }
  if (auto outcome = core_.take_outcome()) {
    // A punched birthday path keeps its port (for the peer's last probes, and
    // for the owner to take); the others go now.
    close_ports(outcome->punched() ? outcome->via : 0);
    if (auto done = std::exchange(done_, nullptr)) done(*outcome);
  }
  auto next = core_.next_deadline();
  if (!next) {
    timer_->timer.cancel();
    return;
  }
  timer_->timer.expires_at(*next);
  std::weak_ptr<PunchSession> weak = self;
  timer_->timer.async_wait([weak](boost::system::error_code ec) {
    auto s = weak.lock();
    if (ec || !s) return;
    s->core_.on_timer(now());
    s->pump();
  });
}

}  // namespace yonder::punch
