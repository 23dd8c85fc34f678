// The LAN discovery protocol without I/O (announcement.h has the picture):
// what to announce and when, and what a received datagram means. It reads
// no clock and opens no socket: callers pass `now`, collect datagrams to
// send with take_outgoing() and call on_timer() at next_deadline().
// lan_discovery.h runs it on a multicast socket; tests drive it directly.
//
// Schedule: with at least one paired peer, a query at start(), another one
// second later (multicast is lossy on Wi-Fi), then a plain announcement
// every `interval` (plus up to 10 % random jitter so nodes started together
// drift apart). A query from a paired peer is answered with an announcement
// at once, but at most one answer per `answer_gap`. With no paired peer it
// sends nothing and ignores everything: nobody could read it.
//
// Costs bounded against a noisy LAN: each datagram costs one HMAC per paired
// peer, so at most `max_datagrams_per_second` are examined (the rest are
// dropped unread), and a datagram whose nonce was seen recently (the same
// packet arriving twice, or replayed) is dropped.
//
// Not thread-safe: one thread (the event loop) owns it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "crypto/node_id.h"
#include "discovery/announcement.h"

namespace yonder::discovery {

using SteadyTime = std::chrono::steady_clock::time_point;

struct PairedPeer {
  NodeId id;
  PairKey key;  // derive_pair_key(self, id)
};

// A paired peer seen on the LAN: its link should be reachable at
// address:port. A hint only: the link's TLS handshake (which pins the peer's
// key) decides; a forged or replayed announcement can at worst name an
// address where that handshake fails.
struct LanCandidate {
  NodeId peer;
  std::string address;  // the datagram's source address, e.g. "192.168.1.10"
  uint16_t port = 0;    // the peer's link port
};

struct LanDiscoveryConfig {
  uint16_t link_port = 0;  // this node's link port, announced
  std::chrono::milliseconds interval{30000};
  std::chrono::milliseconds answer_gap{1000};
  std::chrono::milliseconds second_query_after{1000};
  int max_datagrams_per_second = 200;
};

class LanDiscoveryCore {
 public:
  // Fills a buffer with random bytes (nonces, filler tags, jitter).
  using RandomFill = std::function<void(std::span<uint8_t>)>;

  LanDiscoveryCore(const PublicKeyBytes& self, LanDiscoveryConfig config, RandomFill random);

  // Replaces the set of paired peers (set_peers does not send). True when
  // a peer is new: the caller restarts the queries (start()) so a node
  // just paired is found at once, not at the next periodic announcement.
  bool set_peers(std::vector<PairedPeer> peers);
  size_t peer_count() const { return peers_.size(); }

  // Starts the schedule: the first query is due at `now`.
  void start(SteadyTime now);

  // One received datagram from `from` (its source address as text). Returns
  // the candidate when it is a paired peer's announcement.
  std::optional<LanCandidate> on_datagram(ByteView datagram, const std::string& from, SteadyTime now);

  // Does what is due at `now` (announcements).
  void on_timer(SteadyTime now);
  // When on_timer() next has work; SteadyTime::max() when none.
  SteadyTime next_deadline() const;

  // Datagrams to multicast now, oldest first (each to every interface).
  std::vector<Bytes> take_outgoing();

  // Datagrams dropped by the rate bound, for counters and tests.
  uint64_t dropped() const { return dropped_; }

 private:
  void announce(bool query);
  std::chrono::milliseconds jittered(std::chrono::milliseconds base);
  bool seen_nonce(const Nonce& nonce);

  PublicKeyBytes self_;
  LanDiscoveryConfig config_;
  RandomFill random_;
  std::vector<PairedPeer> peers_;
  bool started_ = false;
  int queries_left_ = 0;
  SteadyTime next_announce_ = SteadyTime::max();
  SteadyTime answer_due_ = SteadyTime::max();
  SteadyTime last_answer_ = SteadyTime::min();
  std::vector<Bytes> outgoing_;
  // Token bucket for examined datagrams.
  double tokens_ = 0;
  SteadyTime tokens_at_{};
  uint64_t dropped_ = 0;
  // Recently seen nonces, oldest first (bounded).
  std::deque<Nonce> nonce_order_;
  std::set<Nonce> nonces_;
};

}  // namespace yonder::discovery
