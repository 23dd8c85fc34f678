// The consumer's side of the mesh (issue 10): the capacity of the providers
// this node is paired with, placement of a job on them, and the lease that
// books the chosen provider's devices until the job is submitted.
//
// Local routes:
//   GET  /v1/mesh                  asks every paired peer for its signed
//                                  advertisement (mesh.advertisement), verifies
//                                  it (signature, key = the peer's pinned key,
//                                  window), keeps the newest per provider and
//                                  answers the capacity: per provider GPUs,
//                                  free, queue, RTT, path, freshness; totals.
//                                  ?refresh=0 answers from the snapshot.
//   POST /v1/mesh/lease {"gpus", "vram_bytes", "min_capability", "labels"}
//                                  refreshes, places (mesh::place), then
//                                  offers the job to the plan's providers in
//                                  order (mesh.lease), each answer awaited
//                                  at most mesh.offer_timeout_ms; a refusal
//                                  or silence falls through to the next.
//                                  Answers the accepted lease, the provider,
//                                  its score's parts, the plan and the
//                                  refusals; or why nothing could be had.
//   POST /v1/mesh/bind {"provider", "lease_id", "job_id"}
//                                  the job was submitted: the provider ties
//                                  the lease to it (mesh.bind) and releases
//                                  it when the job ends.
//   POST /v1/mesh/release {"provider", "lease_id"}
//                                  gives the lease back (the submit failed).
//
// Between lease and bind this daemon renews the lease every third of its
// term (a slow upload keeps its devices) for at most kMaxUnboundRenewal; a
// CLI that died before binding lets it lapse after that.
//
// Threading: everything on the event loop (no blocking work).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/server.h"
#include "mesh/placement.h"
#include "node/credits.h"
#include "node/mesh_provider.h"
#include "node/peer_link.h"

namespace boost::asio {
class io_context;
}

namespace yonder::node {

class MeshConsumer {
 public:
  static constexpr std::chrono::minutes kMaxUnboundRenewal{30};

  MeshConsumer(boost::asio::io_context& io, PeerLink& link, MeshSettings settings);
  ~MeshConsumer();
  void add_routes(api::Router& router);
  // Our credit standing with each provider feeds placement's credit term
  // (mirrored from this node's own ledger: the provider's view of us is the
  // allowance minus what it gave us net). Unset: every provider 0.
  void set_credits(const Credits* credits) { credits_ = credits; }

  // What this node knows of one provider.
  struct Known {
    PeerLink::Target target;
    std::optional<mesh::Advertisement> ad;  // the newest verified one
    std::string error;                      // why the last ask failed ("" when it did not)
    mesh::UnixMs fetched_at_ms = 0;
    double rtt_ms = 0;
    std::string path;  // the link's best path ("direct 127.0.0.1:...", "relay ...")
  };

 private:
  struct Held;
  // Asks every paired peer; `done` once all answered or failed.
  void refresh(std::function<void()> done);
  nlohmann::json capacity_json(mesh::UnixMs now) const;
  mesh::Snapshot snapshot(mesh::UnixMs now) const;
  void lease(const api::Request& req, api::Reply reply);
  void lease_call(const std::string& provider, const nlohmann::json& params, api::Reply reply, const char* method);
  void renew_later(std::shared_ptr<Held> held);
  void forget(const std::string& key);

  boost::asio::io_context& io_;
  PeerLink& link_;
  MeshSettings settings_;
  const Credits* credits_ = nullptr;
  std::map<PublicKeyBytes, Known> known_;
  std::map<std::string, std::shared_ptr<Held>> held_;  // "provider/lease id" -> renewal state
  uint64_t next_request_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::node
