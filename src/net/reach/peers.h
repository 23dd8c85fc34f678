// What node features (jobs, mesh, groups, files, sessions, metering) need of
// this node's peers: the link service to call and serve on, the paired peers
// to call, what each is granted, and the pairing hooks groups build on.
// PeerLink (peer_link.h) is the real one, with sockets, relays, punching and
// LAN discovery behind it; a simulation implements it over in-memory
// channels (tests/sim), so a feature that takes a Peers& runs unchanged on
// many nodes in one process.
//
// Threading: event loop only, like the link service it hands out.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "crypto/node_id.h"
#include "crypto/scope.h"
#include "crypto/share_link.h"
#include "net/link/link_service.h"

namespace yonder::reach {

// The capability a request method needs, by the word before its first dot;
// nullopt: any pinned peer may call it (group.*, hello-level methods).
inline std::optional<Capability> capability_for(const std::string& method) {
  auto prefix = method.substr(0, method.find('.'));
  if (prefix == "run") return Capability::kRun;
  if (prefix == "exec") return Capability::kExec;
  if (prefix == "forward") return Capability::kForward;
  if (prefix == "files") return Capability::kFiles;
  if (prefix == "mesh") return Capability::kMesh;
  if (prefix == "cuda") return Capability::kCuda;
  return std::nullopt;
}

class Peers {
 public:
  virtual ~Peers() = default;

  // The link this node calls peers over and serves its methods on.
  virtual link::LinkService& service() = 0;

  // A paired peer, as a feature calls it.
  struct Target {
    PublicKeyBytes key{};
    std::string node_id;
    std::string name;
    std::vector<std::string> addresses;
    std::optional<Scope> granted_to_us;  // what it lets this node do; nullopt: nothing (it paired with us)
  };
  // A paired peer by node id, name or first group of its id.
  virtual Result<Target> target(const std::string& id_or_name) const = 0;
  // Every paired peer that is not denied (the mesh asks each for its capacity).
  virtual std::vector<Target> targets() const = 0;
  // What this node grants `key` now; nullopt when it is not pinned (or denied).
  virtual std::optional<Scope> grant_of(const PublicKeyBytes& key) const = 0;
  // A request that must be answered within `deadline`: a peer that stopped
  // answering (a stopped process keeps its connection open) gets
  // kUnavailable naming it, instead of the link's own request timeout.
  virtual void call_within(const Target& t, const std::string& method, const nlohmann::json& params,
                           std::chrono::milliseconds deadline, std::function<void(Result<nlohmann::json>)> done) = 0;

  // Called (event loop) for every request the trust policy refuses, for the
  // audit log; keep it short (post blocking work elsewhere).
  using RefusalHook = std::function<void(const PublicKeyBytes& key, const std::string& method, const Error& why)>;
  virtual void on_refused(RefusalHook hook) = 0;

  // Groups (mesh/groups/groups.h) build on pairing through these.
  // Makes a share link from a POST /v1/share body (scope fields, expires_s,
  // uses, label); the same answer as that route.
  virtual Result<nlohmann::json> share(const nlohmann::json& body) = 0;
  // A share link was redeemed: `key` (named `name`) is pinned now, before
  // the pairing is answered; the fields of the object returned are added to
  // that answer (pair_ok).
  using RedeemedHook =
      std::function<nlohmann::json(const LinkIdBytes& id, const PublicKeyBytes& key, const std::string& name)>;
  virtual void on_redeemed(RedeemedHook hook) = 0;
  // This node paired with `provider` (POST /v1/pair), which answered
  // `answer` (pair_ok): `done(extra)` must follow, and `extra` goes into the
  // route's answer as "groups".
  using PairedHook = std::function<void(const PublicKeyBytes& provider, const nlohmann::json& answer,
                                        std::function<void(nlohmann::json)> done)>;
  virtual void on_paired(PairedHook hook) = 0;
  // A session with a pinned peer is established.
  virtual void on_session(std::function<void(const PublicKeyBytes& peer)> hook) = 0;
};

}  // namespace yonder::reach
