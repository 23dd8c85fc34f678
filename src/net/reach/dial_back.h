// Dial-back on the event loop (the decisions are dial_back_core.h's):
// serves `reach.dial_back` for pinned peers (any pinned peer may ask; no
// capability), and runs a round for netcheck: ask up to three connected
// peers to dial this node back at its public addresses, over TCP and over
// UDP, and keep the two verdicts.
//
//   reach.dial_back  {"addresses": ["198.51.100.7:7850", ...],    (TCP, 0 to 4)
//                     "udp": ["198.51.100.7:7850", ...]}           (optional, 0 to 4; 1 in all at least)
//     -> {"results": [{"address": ..., "reached": true|false,
//                      "transport": "udp" (only for a UDP address),
//                      "refused": "why" (only when not dialled)}]}
//
// "reached" is true only when a handshake at that address proved the asking
// peer's key: TLS over TCP (LinkService::probe), QUIC over UDP from a fresh
// port (PunchPaths::probe_udp); a failed dial says no more than false. A
// helper without a UDP socket, or older than UDP dial-back, answers for
// TCP only, and the asker counts it as not having tested UDP. Event loop
// only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "net/link/link_service.h"
#include "net/reach/dial_back_core.h"

namespace yonder::reach {

// A helper's answer to reach.dial_back, read as what it is: untrusted. Only
// the addresses we asked about count, an address counts as reached only when
// its "reached" is true, and an answer of the wrong shape is an error, never
// a throw (nlohmann's value() throws on a "reached" that is not a boolean).
// `asked_udp`: the UDP addresses we asked about.
DialBackAnswer read_dial_back_answer(const std::string& helper, const std::vector<std::string>& asked,
                                     const Result<nlohmann::json>& answer,
                                     const std::vector<std::string>& asked_udp = {});

class DialBack {
 public:
  // How long a dial may take to connect, and again to finish the handshake.
  static constexpr std::chrono::milliseconds kDialWithin{5'000};
  // How long we wait for a helper's answer (its dials included).
  static constexpr std::chrono::milliseconds kAnswerWithin{15'000};

  // Sends `helper` the request `params` and hears its answer (PeerLink's
  // call_within with kAnswerWithin).
  using Ask = std::function<void(const Helper& helper, const nlohmann::json& params,
                                 std::function<void(Result<nlohmann::json>)> done)>;
  // Whether `peer` answers over UDP (QUIC) at `address` now, within
  // `within` (PunchPaths::probe_udp); kFailedPrecondition: this node cannot
  // dial over UDP (no socket), and the address is left out of the answer.
  using ProbeUdp = std::function<void(const PublicKeyBytes& peer, const std::string& address,
                                      std::chrono::milliseconds within, std::function<void(Status)> done)>;
  // `own_hosts`: this host's addresses, asked when a request is admitted.
  DialBack(link::LinkService& link, Ask ask, std::function<std::vector<std::string>()> own_hosts);
  ~DialBack();
  DialBack(const DialBack&) = delete;
  DialBack& operator=(const DialBack&) = delete;

  // Serves reach.dial_back on the link; with `probe_udp` (this node has a
  // UDP socket) it dials UDP addresses too, else answers for TCP only.
  void register_method(ProbeUdp probe_udp = nullptr);
  // What one round tests: TCP `candidates` (dial_back_candidates') and
  // whether link.listen is set; UDP `udp_candidates`
  // (udp_dial_back_candidates') and whether this node has a UDP socket.
  struct Round {
    std::vector<std::string> candidates;
    bool listening = false;
    std::vector<std::string> udp_candidates;
    bool udp_socket = false;
  };
  // One round: asks `helpers` to dial them, keeps both verdicts, then `done`.
  void check(Round what, std::vector<Helper> helpers, std::function<void()> done);
  // The last verdicts, for GET /v1/netcheck's "reachability": TCP's
  // {"state", "why", "address", "tested", "confirmed_by", "failed_by",
  //  "udp": {the same for UDP}}.
  nlohmann::json state() const;
  // The last TCP verdict itself (none: no round yet); the relay offer rests on it.
  const std::optional<Reachability>& last() const { return last_; }
  const std::optional<Reachability>& last_udp() const { return last_udp_; }

 private:
  void serve(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply);

  link::LinkService& link_;
  Ask ask_;
  std::function<std::vector<std::string>()> own_hosts_;
  ProbeUdp probe_udp_;
  DialBackGate gate_;
  std::optional<Reachability> last_;
  std::optional<Reachability> last_udp_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::reach
