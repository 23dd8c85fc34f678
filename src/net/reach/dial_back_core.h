// Reachability measured by peers, without I/O (AutoNAT's idea, over our
// own pinned links): this node asks a few paired peers that are connected
// now to dial it back at the addresses it believes reach it, and so knows,
// with evidence and from whom, whether it is reachable from the internet.
// dial_back.h owns the I/O: the calls, the dials, the verdict kept for
// netcheck.
//
// Asking, over TCP (the link's port) and over UDP (QUIC, the socket that
// hole punching uses):
//   - dial_back_candidates: which of our TCP addresses are worth testing
//     (the public ones we advertise, the port the router maps for us, and
//     the public IP a relay saw us at with the link's port: a router that
//     forwards that port makes it reachable);
//   - udp_dial_back_candidates: the same for UDP (the advertised hosts with
//     the UDP socket's port, and the public address a relay's STUN saw the
//     socket at: a NAT that lets anyone send to that mapping makes it
//     reachable);
//   - pick_helpers: which connected peers are asked (not those on a LAN
//     path, whose dial would not cross the internet; lowest RTT first; at
//     most kMaxHelpers);
//   - dial_back_verdict, per transport: reachable when a helper completed
//     the pinned handshake (TLS over TCP, QUIC over UDP) with us at one of
//     them, unreachable when every helper that answered could not, unknown
//     otherwise, with who said what.
//
// Serving (a peer asks us): DialBackGate admits a request when the peer has
// a token (kBurst at once, then one per kInterval) and names at most
// kMaxDialBackAddresses addresses per transport; relay::check_dial_back_target
// decides each address (public IPv4 only, never this host's own). The dial
// is a handshake that must prove the asking peer's key (TLS over TCP; QUIC
// from a fresh UDP port, so that no packet we sent before opens the way)
// and the answer is a yes or no per address, so a hostile peer learns
// nothing about what else listens anywhere, and costs us a few SYNs and
// QUIC Initials a minute at most.
//
// Never touches a socket, a clock or a thread; event loop only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/token_bucket.h"
#include "crypto/node_id.h"

namespace yonder::reach {

inline constexpr size_t kMaxDialBackAddresses = 4;  // per transport
inline constexpr size_t kMaxHelpers = 3;

enum class Transport { kTcp, kUdp };
const char* transport_name(Transport transport);  // "tcp", "udp"

// Our addresses worth a dial-back, in this order, public ones only, each
// once, at most kMaxDialBackAddresses: `advertised` (link.advertise, or
// what the link listens on), `mapped` (the router's forward; "" when none),
// then each of `observed_hosts` (a relay's view of our IP) with
// `link_port` (0: the link does not listen, so nothing is added).
std::vector<std::string> dial_back_candidates(const std::vector<std::string>& advertised, const std::string& mapped,
                                              const std::vector<std::string>& observed_hosts, uint16_t link_port);

// Our UDP addresses worth a dial-back, public ones only, each once, at most
// kMaxDialBackAddresses: the hosts of `advertised` with `udp_port` (the
// hole-punching socket's; 0: there is none, so nothing is tested), then
// `stun_public` (where a relay's STUN saw that socket; "" when none).
std::vector<std::string> udp_dial_back_candidates(const std::vector<std::string>& advertised, uint16_t udp_port,
                                                  const std::string& stun_public);

// A connected peer that could dial us back.
struct Helper {
  PublicKeyBytes key{};
  std::string name;
  std::string path;  // the session's path ("direct to ...", "relay ...", "lan ...")
  std::optional<double> rtt_ms;
};

// At most `n` of `connected` (one per key): not those on a LAN path, lowest
// RTT first (unknown last), then by key, so the same facts give the same pick.
std::vector<Helper> pick_helpers(std::vector<Helper> connected, size_t n = kMaxHelpers);

// What one helper answered: per address it tried, whether the pinned
// handshake with us completed there; `error` when it did not answer.
struct DialBackAnswer {
  std::string helper;  // its name
  std::optional<std::string> error;
  std::map<std::string, bool> reached;      // TCP address -> reached
  std::map<std::string, bool> reached_udp;  // UDP address -> reached
  // Whether it dialled over UDP at all (a helper whose link does not use
  // UDP, or an older yonder, answers for TCP only).
  bool tested_udp = false;
};

struct Reachability {
  enum class State { kUnknown, kReachable, kUnreachable };
  State state = State::kUnknown;
  std::string address;                    // kReachable: the first candidate a helper reached
  std::vector<std::string> tested;        // the candidates asked about
  std::vector<std::string> confirmed_by;  // helpers that reached us at `address` (or any candidate)
  std::vector<std::string> failed_by;     // helpers that answered and reached none
  std::string why;                        // for a person: what the verdict rests on, or why there is none
  bool operator==(const Reachability&) const = default;
};

const char* reachability_state_name(Reachability::State state);

// The verdict over `transport` from the answers to one round. `listening`:
// whether the node listens there at all (TCP: link.listen not empty; UDP:
// it has a hole-punching socket), which explains an empty `candidates`.
Reachability dial_back_verdict(const std::vector<std::string>& candidates, bool listening,
                               const std::vector<DialBackAnswer>& answers, Transport transport = Transport::kTcp);

// The serving side's admission of a peer's request.
class DialBackGate {
 public:
  // A node asks on its own when a session comes up (relay_offer_core.h)
  // as well as for each `yonder netcheck`: room for both.
  static constexpr int kBurst = 5;
  static constexpr std::chrono::seconds kInterval{20};

  // ok: dial these (the addresses are checked one by one afterwards);
  // kResourceExhausted when `peer` asked too often, kInvalidArgument when
  // it named none, or more than kMaxDialBackAddresses for TCP
  // (`address_count`) or for UDP (`udp_count`). Spends a token only for a
  // well-formed request.
  Status admit(const PublicKeyBytes& peer, size_t address_count, MonoTime now, size_t udp_count = 0);

 private:
  std::map<PublicKeyBytes, TokenBucket> buckets_;
};

}  // namespace yonder::reach
