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
  config_.birthday_ports = std::clamp(config_.birthday_ports, 1, kMaxBirthdayPorts);
  config_.birthday_probes = std::clamp(config_.birthday_probes, 1, kMaxBirthdayProbes);
  config_.birthday_batch = std::clamp(config_.birthday_batch, 1, config_.birthday_probes);
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
  acked_via_ = 0;
  round_ = 0;
  signals_.push_back(encode_punch_signal(Offer{session_, attempt_, static_cast<uint8_t>(config_.max_attempts),
                                               config_.nat, config_.candidates, config_.birthday}));
  offer_sent_ = now;
  state_ = State::kAwaitAnswer;
  deadline_ = now + config_.signal_timeout;
  // The offer still goes out: it tells the peer why, so it gives up at once too.
  if (config_.nat == NatKind::kSymmetric && !config_.birthday) check_nats(now, NatKind::kUnknown, false);
}

// Fails (true) when a symmetric NAT rules punching out; otherwise decides
// whether this is a birthday punch and which side this is.
bool Puncher::check_nats(MonoTime now, NatKind peer_nat, bool peer_birthday) {
  birthday_ = Birthday::kOff;
  bool mine = config_.nat == NatKind::kSymmetric, theirs = peer_nat == NatKind::kSymmetric;
  if (!mine && !theirs) return false;
  if (mine && theirs) {
    fail(now, PunchFailure::kLocalSymmetric,
         "both NATs are symmetric (a new public port per destination on each side): no direct path can be "
         "guessed; staying on the relay");
    return true;
  }
  NatKind other = mine ? peer_nat : config_.nat;
  if (config_.birthday && peer_birthday && other == NatKind::kPunchable) {
    birthday_ = mine ? Birthday::kHard : Birthday::kEasy;
    return false;
  }
  std::string why;
  if (!config_.birthday) {
    why = config_.birthday_off_why;
  } else if (!peer_birthday) {
    why = "the peer does not do birthday probing (off, or an older version)";
  } else {
    why = std::string("the ") + (mine ? "peer's" : "this node's") +
          " NAT could not be checked, and birthday probing needs one side whose NAT keeps one public port";
  }
  if (mine) {
    fail(now, PunchFailure::kLocalSymmetric,
         "this node's NAT is symmetric (a new public port per destination) and " + why + "; staying on the relay");
  } else {
    fail(now, PunchFailure::kPeerSymmetric,
         "the peer's NAT is symmetric (a new public port per destination) and " + why + "; staying on the relay");
  }
  return true;
}

// The peer's candidates become probe targets; in a birthday punch its public
// (srflx IPv4) ones are sprayed instead, never probed at full TTL from the
// shared socket (a hard side's probe there would reach the easy NAT from a
// port it never opened to, and make it move its host's flow to that port).
void Puncher::take_peer_candidates(const std::vector<Candidate>& candidates) {
  peer_public_.clear();
  for (const auto& c : candidates) {
    if (birthday_ != Birthday::kOff && c.kind == CandidateKind::kServerReflexive && c.address.address().is_v4()) {
      if (std::find(peer_public_.begin(), peer_public_.end(), c.address) == peer_public_.end()) {
        peer_public_.push_back(c.address);
      }
      continue;
    }
    add_target(c.address);
  }
  peer_candidates_ = targets_.size() + peer_public_.size();
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
    acked_via_ = 0;
    round_ = 0;
    signals_.push_back(
        encode_punch_signal(Answer{session_, attempt_, attempts_, config_.nat, config_.candidates, config_.birthday}));
    if (check_nats(now, offer->nat, offer->birthday)) return;
    take_peer_candidates(offer->candidates);
    if (birthday_ != Birthday::kOff && peer_public_.empty()) {
      fail(now, PunchFailure::kNoCandidates,
           "one NAT is symmetric and the peer named no public IPv4 address to probe: staying on the relay");
      return;
    }
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
    if (check_nats(now, answer->nat, answer->birthday)) return;
    if (answer->candidates.empty()) {
      fail(now, PunchFailure::kNoCandidates, "the peer has no UDP address to punch from: staying on the relay");
      return;
    }
    take_peer_candidates(answer->candidates);
    if (birthday_ != Birthday::kOff && peer_public_.empty()) {
      fail(now, PunchFailure::kNoCandidates,
           "one NAT is symmetric and the peer named no public IPv4 address to probe: staying on the relay");
      return;
    }
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

void Puncher::add_target(const udp::endpoint& e, int via) {
  if (targets_.size() >= kMaxTargets) return;
  Target t{e, via};
  if (std::find(targets_.begin(), targets_.end(), t) == targets_.end()) targets_.push_back(t);
}

void Puncher::send(const udp::endpoint& to, PunchType type, uint16_t seq, std::optional<int> ttl, int via) {
  datagrams_.push_back(OutgoingDatagram{to, encode_punch_packet({type, session_, self_tag_, seq}), ttl, via});
  ++datagrams_sent_;
}

void Puncher::begin_punching(MonoTime now) {
  state_ = State::kPunching;
  window_end_ = now + config_.window;
  round_ = 0;
  probed_ports_.clear();
  birthday_from_ = now + config_.birthday_delay;
  if (birthday_ == Birthday::kHard) birthday_spray(now);
  probe_round(now);
}

// Hard side: one probe from each birthday port to each of the peer's public
// addresses, at the low TTL: it opens a mapping in this side's NAT and dies
// before the peer's. (The ports stay open across a retry: the driver keeps
// its sockets, and the mappings towards the peer's address still hold.)
void Puncher::birthday_spray(MonoTime now) {
  std::optional<int> ttl;
  if (config_.low_ttl > 0) ttl = config_.low_ttl;
  for (int via = 1; via <= config_.birthday_ports; ++via) {
    for (const auto& to : peer_public_) {
      uint16_t seq = next_seq_++;
      sent_[seq] = now;
      send(to, PunchType::kProbe, seq, ttl, via);
    }
  }
}

// Easy side: the next batch of probes to random ports of the peer's public
// address(es), each port once per attempt.
void Puncher::birthday_probes(MonoTime now) {
  if (now < birthday_from_ || peer_public_.empty()) return;
  constexpr uint32_t kPorts = 65536 - kBirthdayFirstPort;
  for (int i = 0; i < config_.birthday_batch && probed_ports_.size() < static_cast<size_t>(config_.birthday_probes);
       ++i) {
    uint16_t port = 0;
    for (int tries = 0; tries < 32; ++tries) {  // bounded: at most 2,048 of 64,512 ports are taken
      port = static_cast<uint16_t>(kBirthdayFirstPort + random_() % kPorts);
      if (!std::binary_search(probed_ports_.begin(), probed_ports_.end(), port)) break;
    }
    probed_ports_.insert(std::upper_bound(probed_ports_.begin(), probed_ports_.end(), port), port);
    const auto& base = peer_public_[probed_ports_.size() % peer_public_.size()];
    uint16_t seq = next_seq_++;
    sent_[seq] = now;
    send(udp::endpoint(base.address(), port), PunchType::kProbe, seq, std::nullopt, 0);
  }
}

void Puncher::probe_round(MonoTime now) {
  std::optional<int> ttl;
  if (config_.low_ttl > 0 && round_ < config_.low_ttl_rounds) ttl = config_.low_ttl;
  for (const auto& t : targets_) {
    uint16_t seq = next_seq_++;
    sent_[seq] = now;
    // A birthday port's target came from a probe that crossed both NATs: full TTL.
    send(t.to, PunchType::kProbe, seq, t.via == 0 ? ttl : std::nullopt, t.via);
  }
  if (birthday_ == Birthday::kEasy) birthday_probes(now);
  ++round_;
  deadline_ = now + config_.interval;
}

bool Puncher::on_datagram(MonoTime now, const udp::endpoint& from, ByteView bytes, int via) {
  auto p = decode_punch_packet(bytes);
  if (!p || p->session != session_ || state_ == State::kIdle || state_ == State::kDone) return false;
  if (p->sender == self_tag_) return true;  // our own, reflected back: not the peer
  if (p->sender != peer_tag_) return false;
  if (via < 0 || via > (birthday_ == Birthday::kHard ? config_.birthday_ports : 0)) return true;  // not our socket
  if (p->type == PunchType::kProbe) {
    // The peer already punches: its go (or our start time) is moot.
    if (state_ == State::kAwaitGo || state_ == State::kAwaitStart) begin_punching(now);
    if (state_ == State::kAwaitAnswer) return true;  // cannot happen in order; stay with the exchange
    send(from, PunchType::kAck, p->seq, std::nullopt, via);
    if (state_ != State::kPunching) return true;
    got_probe_ = true;
    if (via != 0 && std::find(targets_.begin(), targets_.end(), Target{from, via}) == targets_.end()) {
      // A birthday port the peer found: probe back through it now, not a round later.
      add_target(from, via);
      uint16_t seq = next_seq_++;
      sent_[seq] = now;
      send(from, PunchType::kProbe, seq, std::nullopt, via);
    } else {
      add_target(from, via);
    }
  } else {
    if (state_ != State::kPunching) return true;
    auto it = sent_.find(p->seq);
    if (it == sent_.end()) return true;
    if (!acked_from_) {
      acked_from_ = from;
      acked_via_ = via;
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
  o.birthday = birthday_ != Birthday::kOff;
  o.via = acked_via_;
  o.datagrams = datagrams_sent_;
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
  o.birthday = birthday_ != Birthday::kOff;
  o.datagrams = datagrams_sent_;
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
  if (birthday_ != Birthday::kOff && !got_probe_ && !acked_from_) {
    reason = birthday_ == Birthday::kEasy
                 ? "birthday probing found no path: none of " + std::to_string(probed_ports_.size()) +
                       " probes to random ports of the peer's symmetric NAT reached one of the ports it opened "
                       "within " +
                       seconds_text(config_.window) + tries + "; staying on the relay"
                 : "birthday probing found no path: none of the peer's probes reached the " +
                       std::to_string(config_.birthday_ports) + " ports this node opened in its symmetric NAT within " +
                       seconds_text(config_.window) + tries + "; staying on the relay";
  } else if (got_probe_) {
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
