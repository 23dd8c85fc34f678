#include "net/punch/puncher.h"

#include <algorithm>

namespace yonder::punch {
namespace {

constexpr size_t kMaxTargets = 2 * kMaxCandidates;  // the peer's candidates plus addresses its probes came from

std::string seconds_text(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace

bool initiator_is_self(const PublicKeyBytes& self, const PublicKeyBytes& peer) {
  return self < peer;
}

const char* punch_failure_name(PunchFailure f) {
  switch (f) {
    case PunchFailure::kNone: return "punched";
    case PunchFailure::kLocalSymmetric: return "local_symmetric";
    case PunchFailure::kPeerSymmetric: return "peer_symmetric";
    case PunchFailure::kNoCandidates: return "no_candidates";
    case PunchFailure::kNoAnswer: return "no_answer";
    case PunchFailure::kSignalTimeout: return "signal_timeout";
    case PunchFailure::kSignalError: return "signal_error";
    case PunchFailure::kCancelled: return "cancelled";
  }
  return "unknown";
}

Puncher::Puncher(PuncherConfig config, std::function<uint64_t()> random)
    : config_(std::move(config)), random_(std::move(random)) {
  if (config_.candidates.size() > kMaxCandidates) config_.candidates.resize(kMaxCandidates);
  config_.max_attempts = std::clamp(config_.max_attempts, 1, static_cast<int>(kMaxAttemptNumber));
  config_.low_ttl_rounds = std::max(config_.low_ttl_rounds, 0);
}

void Puncher::start(MonoTime now) {
  if (state_ != State::kIdle) return;
  started_ = now;
  if (config_.role == Role::kResponder) return;  // waits for an offer
  if (config_.candidates.empty()) {
    fail(now, PunchFailure::kNoCandidates,
         "this node has no UDP address to offer the peer (no socket, or no relay answered over UDP): staying on "
         "the relay");
    return;
  }
  attempt_ = 1;
  send_offer(now);
}

void Puncher::send_offer(MonoTime now) {
  session_ = random_();
  self_tag_ = punch_tag(session_, config_.self_key);
  peer_tag_ = punch_tag(session_, config_.peer_key);
  targets_.clear();
  sent_.clear();
  got_probe_ = false;
  acked_from_.reset();
  round_ = 0;
  signals_.push_back(encode_punch_signal(
      Offer{session_, attempt_, static_cast<uint8_t>(config_.max_attempts), config_.nat, config_.candidates}));
  offer_sent_ = now;
  state_ = State::kAwaitAnswer;
  deadline_ = now + config_.signal_timeout;
  // The offer still goes out: it tells the peer why, so it gives up at once too.
  if (config_.nat == NatKind::kSymmetric) check_nats(now, NatKind::kUnknown);
}

// Fails (true) when either NAT is symmetric.
bool Puncher::check_nats(MonoTime now, NatKind peer_nat) {
  if (config_.nat == NatKind::kSymmetric) {
    fail(now, PunchFailure::kLocalSymmetric,
         "this node's NAT is symmetric (a new public port per destination): hole punching cannot work; staying on "
         "the relay");
    return true;
  }
  if (peer_nat == NatKind::kSymmetric) {
    fail(now, PunchFailure::kPeerSymmetric,
         "the peer's NAT is symmetric (a new public port per destination): hole punching cannot work; staying on "
         "the relay");
    return true;
  }
  return false;
}

void Puncher::on_signal(MonoTime now, const PunchSignal& signal) {
  if (state_ == State::kDone) return;
  if (const auto* offer = std::get_if<Offer>(&signal)) {
    // An initiator ignores offers (both sides chose to initiate: the tie-break
    // initiator_is_self says who yields). A responder takes a first offer, and
    // a retry's new offer while it waits or punches.
    if (config_.role != Role::kResponder || offer->session == session_ || state_ == State::kLinger) return;
    if (state_ == State::kIdle) started_ = now;
    session_ = offer->session;
    attempt_ = offer->attempt;
    attempts_ = offer->attempts;
    self_tag_ = punch_tag(session_, config_.self_key);
    peer_tag_ = punch_tag(session_, config_.peer_key);
    targets_.clear();
    sent_.clear();
    got_probe_ = false;
    acked_from_.reset();
    round_ = 0;
    for (const auto& c : offer->candidates) add_target(c.address);
    peer_candidates_ = targets_.size();
    signals_.push_back(encode_punch_signal(Answer{session_, attempt_, attempts_, config_.nat, config_.candidates}));
    if (check_nats(now, offer->nat)) return;
    if (offer->candidates.empty() || config_.candidates.empty()) {
      fail(now, PunchFailure::kNoCandidates,
           std::string(offer->candidates.empty() ? "the peer" : "this node") +
               " has no UDP address to punch from: staying on the relay");
      return;
    }
    state_ = State::kAwaitGo;
    deadline_ = now + config_.signal_timeout;
    return;
  }
  if (const auto* answer = std::get_if<Answer>(&signal)) {
    if (config_.role != Role::kInitiator || state_ != State::kAwaitAnswer || answer->session != session_) return;
    auto rtt = now - offer_sent_;
    if (check_nats(now, answer->nat)) return;
    if (answer->candidates.empty()) {
      fail(now, PunchFailure::kNoCandidates, "the peer has no UDP address to punch from: staying on the relay");
      return;
    }
    for (const auto& c : answer->candidates) add_target(c.address);
    peer_candidates_ = targets_.size();
    signals_.push_back(encode_punch_signal(Go{session_}));
    // go reaches the peer about rtt/2 from now: start then, together.
    auto delay = std::min<std::chrono::nanoseconds>(rtt / 2, config_.max_start_delay);
    state_ = State::kAwaitStart;
    deadline_ = now + delay;
    if (delay <= std::chrono::nanoseconds(0)) begin_punching(now);
    return;
  }
  const auto& go = std::get<Go>(signal);
  if (config_.role != Role::kResponder || state_ != State::kAwaitGo || go.session != session_) return;
  begin_punching(now);
}

void Puncher::add_target(const udp::endpoint& e) {
  if (targets_.size() >= kMaxTargets) return;
  if (std::find(targets_.begin(), targets_.end(), e) == targets_.end()) targets_.push_back(e);
}

void Puncher::begin_punching(MonoTime now) {
  state_ = State::kPunching;
  window_end_ = now + config_.window;
  round_ = 0;
  probe_round(now);
}

void Puncher::probe_round(MonoTime now) {
  std::optional<int> ttl;
  if (config_.low_ttl > 0 && round_ < config_.low_ttl_rounds) ttl = config_.low_ttl;
  for (const auto& t : targets_) {
    uint16_t seq = next_seq_++;
    sent_[seq] = now;
    datagrams_.push_back(OutgoingDatagram{t, encode_punch_packet({PunchType::kProbe, session_, self_tag_, seq}), ttl});
  }
  ++round_;
  deadline_ = now + config_.interval;
}

bool Puncher::on_datagram(MonoTime now, const udp::endpoint& from, ByteView bytes) {
  auto p = decode_punch_packet(bytes);
  if (!p || p->session != session_ || state_ == State::kIdle || state_ == State::kDone) return false;
  if (p->sender == self_tag_) return true;  // our own, reflected back: not the peer
  if (p->sender != peer_tag_) return false;
  if (p->type == PunchType::kProbe) {
    // The peer already punches: its go (or our start time) is moot.
    if (state_ == State::kAwaitGo || state_ == State::kAwaitStart) begin_punching(now);
    if (state_ == State::kAwaitAnswer) return true;  // cannot happen in order; stay with the exchange
    datagrams_.push_back(
        OutgoingDatagram{from, encode_punch_packet({PunchType::kAck, session_, self_tag_, p->seq}), std::nullopt});
    if (state_ != State::kPunching) return true;
    got_probe_ = true;
    add_target(from);
  } else {
    if (state_ != State::kPunching) return true;
    auto it = sent_.find(p->seq);
    if (it == sent_.end()) return true;
    if (!acked_from_) {
      acked_from_ = from;
      ack_rtt_ = now - it->second;
    }
  }
  if (got_probe_ && acked_from_) succeed(now, *acked_from_, ack_rtt_);
  return true;
}

void Puncher::succeed(MonoTime now, const udp::endpoint& remote, std::chrono::nanoseconds rtt) {
  PunchOutcome o;
  o.remote = remote;
  o.rtt = rtt;
  o.elapsed = now - started_;
  o.attempts = attempt_;
  outcome_ = o;
  state_ = State::kLinger;
  deadline_ = now + config_.linger;
}

void Puncher::fail(MonoTime now, PunchFailure f, std::string reason) {
  PunchOutcome o;
  o.failure = f;
  o.reason = std::move(reason);
  o.elapsed = now - started_;
  o.attempts = attempt_;
  outcome_ = o;
  state_ = State::kDone;
}

void Puncher::attempt_over(MonoTime now) {
  if (config_.role == Role::kInitiator && attempt_ < config_.max_attempts) {
    ++attempt_;
    send_offer(now);
    return;
  }
  std::string tries = attempt_ > 1 ? " (" + std::to_string(attempt_) + " attempts)" : "";
  std::string reason;
  if (got_probe_) {
    reason = "the peer's probes arrive but no answer to ours came back within " + seconds_text(config_.window) + tries +
             ": its NAT or firewall drops them; staying on the relay";
  } else if (acked_from_) {
    reason = "our probes reach the peer but its own never arrived within " + seconds_text(config_.window) + tries +
             ": this side's NAT or firewall drops them; staying on the relay";
  } else {
    reason = "no answer on any of the peer's " + std::to_string(peer_candidates_) + " addresses within " +
             seconds_text(config_.window) + tries +
             ": a firewall (or a NAT that filters by port) blocks UDP between the two; staying on the relay";
  }
  if (config_.role == Role::kResponder && attempt_ < attempts_) {
    state_ = State::kAwaitRetry;
    deadline_ = now + config_.signal_timeout;
    retry_failure_ = std::move(reason);
    return;
  }
  fail(now, PunchFailure::kNoAnswer, std::move(reason));
}

void Puncher::on_timer(MonoTime now) {
  switch (state_) {
    case State::kIdle:
    case State::kDone: return;
    case State::kAwaitAnswer:
      if (now >= deadline_) {
        fail(now, PunchFailure::kSignalTimeout,
             "the peer did not answer the hole-punching offer through the relay within " +
                 seconds_text(config_.signal_timeout) +
                 " (it may run a version without hole punching); staying on the relay");
      }
      return;
    case State::kAwaitGo:
      if (now >= deadline_) {
        fail(now, PunchFailure::kSignalTimeout,
             "the peer offered to punch but did not say go through the relay within " +
                 seconds_text(config_.signal_timeout) + "; staying on the relay");
      }
      return;
    case State::kAwaitStart:
      if (now >= deadline_) begin_punching(now);
      return;
    case State::kAwaitRetry:
      if (now >= deadline_) fail(now, PunchFailure::kNoAnswer, std::move(retry_failure_));
      return;
    case State::kPunching:
      if (now >= window_end_) {
        attempt_over(now);
      } else if (now >= deadline_) {
        probe_round(now);
      }
      return;
    case State::kLinger:
      if (now >= deadline_) state_ = State::kDone;
      return;
  }
}

void Puncher::cancel(MonoTime now) {
  if (state_ == State::kDone) return;
  if (state_ == State::kLinger) {
    state_ = State::kDone;
    return;
  }
  fail(now, PunchFailure::kCancelled, "hole punching was cancelled");
}

std::optional<MonoTime> Puncher::next_deadline() const {
  switch (state_) {
    case State::kIdle:
    case State::kDone: return std::nullopt;
    case State::kPunching: return std::min(deadline_, window_end_);
    default: return deadline_;
  }
}

bool Puncher::finished() const {
  return state_ == State::kDone;
}

}  // namespace yonder::punch
