#include "net/punch/nat_check.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace yonder::punch {
namespace {

std::string text(const udp::endpoint& e) {
  return e.address().is_v6() ? "[" + e.address().to_string() + "]:" + std::to_string(e.port())
                             : e.address().to_string() + ":" + std::to_string(e.port());
}

}  // namespace

NatCheck::NatCheck(NatCheckConfig config, std::function<StunTransactionId()> random)
    : config_(std::move(config)), random_(std::move(random)) {}

void NatCheck::start(MonoTime now) {
  if (started_) return;
  started_ = true;
  deadline_ = now + config_.timeout;
  for (const auto& address : config_.servers) {
    Server s;
    s.address = address;
    s.transaction = random_();
    servers_.push_back(s);
  }
  if (servers_.empty()) {
    finish();
    return;
  }
  for (auto& s : servers_) send(s, now);
}

void NatCheck::send(Server& s, MonoTime now) {
  out_.push_back(OutgoingDatagram{s.address, encode_binding_request(s.transaction), std::nullopt});
  s.next_send = now + config_.first_retransmit * (1 << s.sends);
  ++s.sends;
}

bool NatCheck::on_datagram(MonoTime /*now*/, const udp::endpoint& from, ByteView bytes) {
  if (!started_ || done_) return false;
  for (auto& s : servers_) {
    if (s.mapped || s.address != from) continue;
    auto mapped = decode_binding_response(bytes, s.transaction);
    if (!mapped) continue;
    s.mapped = *mapped;
    bool all = true;
    for (const auto& t : servers_) all = all && t.mapped.has_value();
    if (all) finish();
    return true;
  }
  return false;
}

void NatCheck::on_timer(MonoTime now) {
  if (!started_ || done_) return;
  if (now >= deadline_) {
    finish();
    return;
  }
  for (auto& s : servers_) {
    if (!s.mapped && s.sends < config_.max_sends && now >= s.next_send) send(s, now);
  }
}

std::optional<MonoTime> NatCheck::next_deadline() const {
  if (!started_ || done_) return std::nullopt;
  MonoTime next = deadline_;
  for (const auto& s : servers_) {
    if (!s.mapped && s.sends < config_.max_sends && s.next_send < next) next = s.next_send;
  }
  return next;
}

std::vector<OutgoingDatagram> NatCheck::take_datagrams() {
  return std::exchange(out_, {});
}

void NatCheck::finish() {
  done_ = true;
  result_ = NatCheckResult{};
  std::vector<udp::endpoint> answers;
  std::vector<const Server*> answered;
  for (const auto& s : servers_) {
    result_.servers.push_back(ServerMapping{s.address, s.mapped});
    if (s.mapped) answered.push_back(&s);
  }
  if (answered.empty()) {
    result_.nat = NatKind::kUnknown;
    result_.why = servers_.empty()
                      ? "no relay to ask: configure a relay (link.relays) to learn the public UDP address"
                      : "no relay answered over UDP (STUN) within " + std::to_string(config_.timeout.count()) +
                            " ms: a firewall may block outgoing UDP; peers use the relay";
    return;
  }
  result_.public_address = answered.front()->mapped;
  // Two answers from different server IPs decide; answers from one IP (two
  // ports of one relay) say nothing about endpoint dependence across hosts.
  for (size_t i = 0; i < answered.size(); ++i) {
    for (size_t j = i + 1; j < answered.size(); ++j) {
      const auto& a = *answered[i];
      const auto& b = *answered[j];
      if (a.address.address() == b.address.address()) continue;
      if (*a.mapped != *b.mapped) {
        result_.nat = NatKind::kSymmetric;
        result_.why = "the NAT maps this socket to " + text(*a.mapped) + " towards " + text(a.address) + " but to " +
                      text(*b.mapped) + " towards " + text(b.address) +
                      ": a new public port per destination (symmetric NAT): a direct path needs a peer whose NAT "
                      "keeps one port (birthday probing); with any other peer, the relay";
        return;
      }
    }
  }
  for (size_t i = 0; i < answered.size(); ++i) {
    for (size_t j = i + 1; j < answered.size(); ++j) {
      if (answered[i]->address.address() != answered[j]->address.address()) {
        result_.nat = NatKind::kPunchable;
        result_.why = "the NAT maps this socket to " + text(*answered[i]->mapped) +
                      " towards every relay asked (endpoint-independent mapping): hole punching can work";
        return;
      }
    }
  }
  result_.nat = NatKind::kUnknown;
  result_.why = "public UDP address " + text(*result_.public_address) +
                ", but only one relay address answered: the NAT's mapping behaviour needs two (a second relay, "
                "or a relay with a second address)";
}

struct NatCheckSession::Timer {
  explicit Timer(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
};

NatCheckSession::NatCheckSession(boost::asio::io_context& io, DatagramPort& port, NatCheckConfig config,
                                 std::function<void(const NatCheckResult&)> done)
    : port_(port), core_(std::move(config)), done_(std::move(done)), timer_(std::make_unique<Timer>(io)) {}

NatCheckSession::~NatCheckSession() = default;

std::shared_ptr<NatCheckSession> NatCheckSession::start(boost::asio::io_context& io, DatagramPort& port,
                                                        NatCheckConfig config,
                                                        std::function<void(const NatCheckResult&)> done) {
  std::shared_ptr<NatCheckSession> s(new NatCheckSession(io, port, std::move(config), std::move(done)));
  s->core_.start(std::chrono::steady_clock::now());
  s->pump();
  return s;
}

bool NatCheckSession::on_datagram(const udp::endpoint& from, ByteView bytes) {
  bool mine = core_.on_datagram(std::chrono::steady_clock::now(), from, bytes);
  if (mine) pump();
  return mine;
}

void NatCheckSession::cancel() {
  done_ = nullptr;
  timer_->timer.cancel();
}

void NatCheckSession::pump() {
  auto self = shared_from_this();  // `done` may drop the caller's last reference
  for (auto& d : core_.take_datagrams()) port_.send_to(d.to, d.bytes, d.ttl);
  if (core_.done()) {
    timer_->timer.cancel();
    if (auto done = std::exchange(done_, nullptr)) done(core_.result());
    return;
  }
  auto next = core_.next_deadline();
  if (!next) return;
  timer_->timer.expires_at(*next);
  std::weak_ptr<NatCheckSession> weak = self;
  timer_->timer.async_wait([weak](boost::system::error_code ec) {
    auto s = weak.lock();
    if (ec || !s) return;
    s->core_.on_timer(std::chrono::steady_clock::now());
    s->pump();
  });
}

}  // namespace yonder::punch
