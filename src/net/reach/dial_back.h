// Dial-back on the event loop (the decisions are dial_back_core.h's):
// serves `reach.dial_back` for pinned peers (any pinned peer may ask; no
// capability), and runs a round for netcheck: ask up to three connected
// peers to dial this node back at its public addresses, keep the verdict.
//
//   reach.dial_back  {"addresses": ["198.51.100.7:7850", ...]}   (1 to 4)
//     -> {"results": [{"address": ..., "reached": true|false,
//                      "refused": "why" (only when not dialled)}]}
//
// "reached" is true only when a TLS handshake at that address proved the
// asking peer's key (LinkService::probe); a failed dial says no more than
// false. Event loop only.
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
DialBackAnswer read_dial_back_answer(const std::string& helper, const std::vector<std::string>& asked,
                                     const Result<nlohmann::json>& answer);

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
  // `own_hosts`: this host's addresses, asked when a request is admitted.
  DialBack(link::LinkService& link, Ask ask, std::function<std::vector<std::string>()> own_hosts);
  ~DialBack();
  DialBack(const DialBack&) = delete;
  DialBack& operator=(const DialBack&) = delete;

  // Serves reach.dial_back on the link.
  void register_method();
  // One round: asks `helpers` to dial `candidates` (dial_back_candidates'),
  // keeps the verdict, then `done`. `listening`: whether link.listen is set.
  void check(std::vector<std::string> candidates, bool listening, std::vector<Helper> helpers,
             std::function<void()> done);
  // The last verdict, for GET /v1/netcheck's "reachability":
  // {"state", "why", "address", "tested", "confirmed_by", "failed_by"}.
  nlohmann::json state() const;
  // The last verdict itself (none: no round yet).
  const std::optional<Reachability>& last() const { return last_; }

 private:
  void serve(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply);

  link::LinkService& link_;
  Ask ask_;
  std::function<std::vector<std::string>()> own_hosts_;
  DialBackGate gate_;
  std::optional<Reachability> last_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::reach
