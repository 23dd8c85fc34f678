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
                           SignalSender send_signal, Done done)
    : port_(port),
      core_(std::move(config), random_session),
      send_signal_(std::move(send_signal)),
      done_(std::move(done)),
      timer_(std::make_unique<Timer>(io)) {}

PunchSession::~PunchSession() = default;

std::shared_ptr<PunchSession> PunchSession::create(boost::asio::io_context& io, DatagramPort& port,
                                                   PuncherConfig config, SignalSender send_signal, Done done) {
  return std::shared_ptr<PunchSession>(
      new PunchSession(io, port, std::move(config), std::move(send_signal), std::move(done)));
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
}

void PunchSession::pump() {
  auto self = shared_from_this();  // `done` may drop the owner's reference
  for (auto& d : core_.take_datagrams()) port_.send_to(d.to, d.bytes, d.ttl);
  for (auto& s : core_.take_signals()) {
    if (send_signal_) send_signal_(std::move(s));
  }
  if (auto outcome = core_.take_outcome()) {
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
