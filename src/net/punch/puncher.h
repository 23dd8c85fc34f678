// Coordinated UDP hole punching between two peers that can already signal
// each other through a relay. Sans-I/O core (Puncher: takes `now`, signals
// and datagrams; gives datagrams to send with their TTL, signals to send,
// its next deadline and one outcome) and a thin Asio driver (PunchSession,
// punch_session.h).
//
// The exchange (after libp2p's DCUtR, with the small-TTL first probes this
// project measured in its NAT lab, docs/architecture.md):
//
//   initiator I                          relay                  responder R
//   offer {session, attempt, nat, cands} ------------------------>  R answers at once
//   <------------------------------------- answer {session, attempt, nat, cands}
//   I measures rtt = answer - offer
//   go {session} ------------------------------------------------>  R starts on go
//   I starts rtt/2 after sending go      (both start about together: go takes ~rtt/2)
//
// Why a `go` and not "R starts on the offer": the first probes must leave
// both NATs before either side's normal probe reaches the far NAT, or that
// NAT records the inbound flow and maps its own host's later packets to a
// new port (measured: even two port-preserving NATs then fail). Starting R
// on the offer would put it a whole relay round trip ahead of I.
//
// Punching: every `interval` (25 ms) a probe to each of the peer's
// candidates (host and server-reflexive, plus any address the peer's probes
// arrived from). The first `low_ttl_rounds` rounds leave with IP TTL
// `low_ttl` (2): they open this side's NAT mapping and die before the far
// NAT. A probe received is answered with an ack to the address it came
// from. Punched = a probe from the peer received AND an ack to one of ours
// received; the path is the address that ack came from (the peer's public
// mapping as it really is, which may differ from its candidates). After
// that the core stops probing and keeps acking the peer's probes for
// `linger`, so the peer completes too.
//
// Birthday probing, when one NAT is symmetric (a new random public port per
// destination) and the other punchable (one public port for every
// destination, filtering by the remote's address and port, as a Linux
// MASQUERADE does), and both sides agree (the signals' birthday flag). The
// symmetric side cannot tell the peer which port its NAT will use, so it
// opens many (after Tailscale's analysis of the birthday paradox):
//   hard side (symmetric)  opens `birthday_ports` (256) sockets of its own
//                          and sends one low-TTL probe from each to the
//                          peer's public mapping: 256 mappings open in its
//                          NAT, each accepting packets from exactly that
//                          mapping, and nothing reaches (and poisons) the
//                          peer's NAT. Nothing else goes out at full TTL to
//                          the peer's public address until a probe arrives.
//   easy side (punchable)  `birthday_delay` after it starts, probes random
//                          distinct ports (1024-65535) of the peer's public
//                          address, `birthday_batch` per interval (16 / 25 ms,
//                          640 a second), at most `birthday_probes` (1024) per
//                          attempt. Each opens its own NAT to replies from
//                          that port; one that lands on an open port of the
//                          hard side reaches that socket.
//   then                   the hard side acks from that socket and probes
//                          back through it; the easy side acks; both have a
//                          probe and an ack: punched, and the hard side's
//                          outcome names the socket (`via`), which its
//                          owner takes (PunchSession::take_port) to carry QUIC.
// Odds per attempt: 1 - (1 - 256/64512)^1024, about 98 %; the packets per
// attempt are bounded: the hard side 256 x its peer's public addresses (at
// most 8) plus its ordinary rounds and acks, the easy side `birthday_probes`
// plus its ordinary rounds and acks (PunchOutcome::datagrams counts them).
// Both NATs symmetric stays on the relay: each side would have to guess.
//
// Failure, each with a sentence for `yonder peers`: both NATs symmetric, or
// one and no birthday probing (immediately, after offer/answer, no
// packets), no candidates, the relay
// not delivering the answer/go within `signal_timeout`, no answer on any
// candidate within `window` (3 s; the initiator then retries the whole
// exchange with a fresh session up to `max_attempts`), or cancel().
//
// Packets (punch_packet.h) carry the random 64-bit session id from the
// signals and the sender's tag (derived from its key and the session):
// anything else, including replays from an older session, is ignored.
//
// Wiring into yonderd: use PunchRouter (punch_router.h), which keeps one
// PunchSession per peer on the shared socket, makes responders from offers,
// resolves glare and routes packets by session id; its header has the
// recipe. With a session directly:
//
//   PuncherConfig cfg;                      // candidates {host, srflx}, nat from NatCheck
//   cfg.role = Role::kInitiator; cfg.self_key = self; cfg.peer_key = peer;
//   auto s = PunchSession::create(io, port, cfg,
//       [&](Bytes b) { relay_paths.send_signal(peer, std::move(b)); },
//       [&](const PunchOutcome& o) { o.punched() ? use(o.remote) : note(o.reason); });
//   s->start();                             // sends the offer
//   s->on_signal(decode_punch_signal(bytes).value());   // signals from the peer
//   s->on_datagram(from, bytes);            // its punch packets (classify_datagram == kPunch)
//
// Threading: not thread-safe; one loop drives it. A responder serves one
// initiator: a later offer (a retry) replaces the session id and starts
// over; after a window without success it waits signal_timeout for such a
// retry (while the offer's attempt < attempts) before it reports the failure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crypto/node_id.h"
#include "net/punch/datagram_port.h"
#include "net/punch/punch_packet.h"
#include "net/punch/signal.h"

namespace yonder::punch {

enum class Role { kInitiator, kResponder };

// A fixed tie-break both sides compute alike: the smaller key initiates.
bool initiator_is_self(const PublicKeyBytes& self, const PublicKeyBytes& peer);

struct PuncherConfig {
  Role role = Role::kInitiator;
  PublicKeyBytes self_key{};
  PublicKeyBytes peer_key{};
  std::vector<Candidate> candidates;               // ours, at most kMaxCandidates
  NatKind nat = NatKind::kUnknown;                 // ours (NatCheck)
  std::chrono::milliseconds interval{25};          // between probe rounds
  std::chrono::milliseconds window{3000};          // punching time per attempt
  int low_ttl = 2;                                 // IP TTL of the first rounds' probes; 0: none
  int low_ttl_rounds = 3;                          // rounds sent with low_ttl
  int max_attempts = 2;                            // whole exchanges (initiator), 1..kMaxAttemptNumber
  std::chrono::milliseconds signal_timeout{5000};  // for the answer, and for go
  std::chrono::milliseconds max_start_delay{500};  // cap on rtt/2
  std::chrono::milliseconds linger{3000};          // ack the peer's probes this long after success
  // Birthday probing (above): whether this side agrees (and why not, for the
  // failure's sentence), and its bounds.
  bool birthday = true;
  std::string birthday_off_why = "birthday probing is off on this node (link.punch_birthday)";
  int birthday_ports = 256;                       // hard side: sockets opened, 1..kMaxBirthdayPorts
  int birthday_probes = 1024;                     // easy side: probes per attempt, 1..kMaxBirthdayProbes
  int birthday_batch = 16;                        // easy side: probes per interval
  std::chrono::milliseconds birthday_delay{50};   // easy side: from its start to its first birthday probe
};

constexpr int kMaxBirthdayPorts = 256;
constexpr int kMaxBirthdayProbes = 2048;
// The ports a Linux NAT picks from for a source port >= 1024 (and what the
// easy side probes).
constexpr uint16_t kBirthdayFirstPort = 1024;

enum class PunchFailure {
  kNone,            // punched
  kLocalSymmetric,  // this node's NAT maps per destination
  kPeerSymmetric,   // the peer's does
  kNoCandidates,    // one side has no address to punch to or from
  kNoAnswer,        // no probe/ack within the window, every attempt
  kSignalTimeout,   // the relay did not deliver the answer or go in time
  kSignalError,     // the peer sent a malformed or out-of-order signal
  kCancelled,
};

struct PunchOutcome {
  PunchFailure failure = PunchFailure::kNone;
  std::string reason;                   // for the user; empty when punched
  udp::endpoint remote;                 // punched: where the peer's acks come from (use this address)
  std::chrono::nanoseconds rtt{0};      // punched: probe -> ack round trip on the direct path
  std::chrono::nanoseconds elapsed{0};  // from start() (initiator) / the offer (responder) to the outcome
  int attempts = 0;
  bool birthday = false;  // birthday probing was used (one NAT symmetric)
  int via = 0;            // punched: the socket the path runs from (0 the shared one; k: birthday port k)
  size_t datagrams = 0;   // every datagram this side sent, all attempts (the packet bound)
  bool punched() const { return failure == PunchFailure::kNone; }
};

const char* punch_failure_name(PunchFailure f);

class Puncher {
 public:
  Puncher(PuncherConfig config, std::function<uint64_t()> random);

  // Initiator: sends the offer. Responder: nothing (it waits for one).
  void start(MonoTime now);
  void on_signal(MonoTime now, const PunchSignal& signal);
  // A punch packet from the socket (`via` 0: the shared one; k: birthday
  // port k); true when it belonged to this session.
  bool on_datagram(MonoTime now, const udp::endpoint& from, ByteView bytes, int via = 0);
  void on_timer(MonoTime now);
  void cancel(MonoTime now);

  std::optional<MonoTime> next_deadline() const;
  std::vector<OutgoingDatagram> take_datagrams() { return std::exchange(datagrams_, {}); }
  std::vector<Bytes> take_signals() { return std::exchange(signals_, {}); }
  // The outcome, once (then nothing).
  std::optional<PunchOutcome> take_outcome() { return std::exchange(outcome_, std::nullopt); }

  uint64_t session() const { return session_; }
  Role role() const { return config_.role; }
  // True once nothing is left to do (outcome given and lingering over).
  bool finished() const;

 private:
  // kAwaitRetry: a responder whose window passed waits signal_timeout for
  // the initiator's next offer before it gives up.
  enum class State { kIdle, kAwaitAnswer, kAwaitStart, kAwaitGo, kPunching, kAwaitRetry, kLinger, kDone };
  enum class Birthday { kOff, kHard, kEasy };
  struct Target {
    udp::endpoint to;
    int via = 0;
    bool operator==(const Target&) const = default;
  };

  void send_offer(MonoTime now);
  void begin_punching(MonoTime now);
  void probe_round(MonoTime now);
  void add_target(const udp::endpoint& e, int via = 0);
  void take_peer_candidates(const std::vector<Candidate>& candidates);
  void birthday_spray(MonoTime now);
  void birthday_probes(MonoTime now);
  void send(const udp::endpoint& to, PunchType type, uint16_t seq, std::optional<int> ttl, int via);
  void succeed(MonoTime now, const udp::endpoint& remote, std::chrono::nanoseconds rtt);
  void fail(MonoTime now, PunchFailure f, std::string reason);
  void attempt_over(MonoTime now);
  bool check_nats(MonoTime now, NatKind peer_nat, bool peer_birthday);

  PuncherConfig config_;
  std::function<uint64_t()> random_;
  State state_ = State::kIdle;
  uint64_t session_ = 0;
  uint8_t attempt_ = 0;
  uint8_t attempts_ = 1;  // responder: how many the initiator makes in all
  PunchTag self_tag_{}, peer_tag_{};
  MonoTime started_{};  // start() or the first offer
  MonoTime offer_sent_{};
  MonoTime deadline_{};  // the current state's
  MonoTime window_end_{};
  int round_ = 0;
  uint16_t next_seq_ = 0;
  std::map<uint16_t, MonoTime> sent_;  // probe seq -> when (this attempt)
  std::vector<Target> targets_;
  size_t peer_candidates_ = 0;
  bool got_probe_ = false;
  std::optional<udp::endpoint> acked_from_;
  int acked_via_ = 0;
  Birthday birthday_ = Birthday::kOff;
  std::vector<udp::endpoint> peer_public_;  // the peer's public (srflx IPv4) candidates: birthday targets
  std::vector<uint16_t> probed_ports_;      // easy side, this attempt (sorted)
  MonoTime birthday_from_{};                // easy side: first birthday probe
  size_t datagrams_sent_ = 0;
  std::chrono::nanoseconds ack_rtt_{0};
  std::vector<OutgoingDatagram> datagrams_;
  std::vector<Bytes> signals_;
  std::optional<PunchOutcome> outcome_;
  std::string retry_failure_;  // kAwaitRetry: the reason if no retry comes
};

}  // namespace yonder::punch
