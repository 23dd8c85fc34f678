// The consumer's side of the mesh: the capacity of the providers
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
//                                  ?refresh=0 answers from the snapshot
//                                  (kept fresh by the providers' pushes);
//                                  ?group=G only the members of group G.
//   POST /v1/mesh/lease {"gpus", "vram_bytes", "min_capability", "labels", "group"}
//                                  "group" (a name or id prefix of a group
//                                  this node is in) limits placement to
//                                  that group's members (the list this node
//                                  holds, mesh/groups/groups.h);
//                                  refreshes, places (mesh::place), then
//                                  offers the job to the plan's providers in
//                                  order (mesh.lease), each answer awaited
//                                  at most mesh.offer_timeout_ms; a refusal
//                                  or silence falls through to the next.
//                                  Answers the accepted lease, the provider,
//                                  its score's parts, the plan and the
//                                  refusals; or why nothing could be had.
//                                  "exclude": [node ids] leaves those
//                                  providers out (a mesh job's requeue).
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

#include "api/module.h"
#include "api/answer.h"
#include "api/server.h"
#include "base/strong_id.h"
#include "jobs/metering/credits.h"
#include "mesh/core/membership.h"
#include "mesh/core/placement.h"
#include "mesh/provider/mesh_provider.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}

namespace yonder::mesh {

class Groups;
class MeshOpinions;

class MeshConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh (consumer)"; }
  static constexpr std::chrono::minutes kMaxUnboundRenewal{30};

  MeshConsumer(boost::asio::io_context& io, reach::Peers& link, MeshSettings settings);
  ~MeshConsumer();
  void add_routes(api::Router& router) override;
  // advertisement.push {"advertisement"}: a paired provider's signed
  // advertisement, checked as a pulled one is (mesh/provider/mesh_provider.h pushes
  // it on change and every mesh.advertisement_push_s), kept in the snapshot.
  void register_methods() override;
  // Our credit standing with each provider feeds placement's credit term
  // (mirrored from this node's own ledger: the provider's view of us is the
  // allowance minus what it gave us net). Unset: every provider 0.
  void set_credits(const jobs::metering::Credits* credits) { credits_ = credits; }
  // The groups this node is in: each provider's group ids in the snapshot,
  // and `group` in a lease request. Unset: a request naming a group fails.
  void set_groups(const Groups* groups) { groups_ = groups; }
  // Reputation (mesh/consumer/mesh_opinions.h): each provider's 0..1 standing feeds
  // placement's reputation term and shows in GET /v1/mesh; GET /v1/mesh
  // refreshes opinions along with the advertisements. Unset: 0 for all.
  void set_opinions(MeshOpinions* opinions) { opinions_ = opinions; }

  // Leases, as the routes serve them and mesh jobs (mesh/jobs) call them;
  // `answer` (event loop) gets what the route answers. `needs` is the lease
  // route's body ({"gpus", "vram_bytes", "min_capability", "labels",
  // "group"}), which may also name "exclude": node ids not to place on.
  void lease_for(nlohmann::json needs, api::Answer answer);
  void bind_lease(const PeerId& provider, LeaseId lease_id, const JobId& job_id, api::Answer answer);
  void release_lease(const PeerId& provider, LeaseId lease_id, api::Answer answer);

  // What this node knows of one provider.
  struct Known {
    reach::Peers::Target target;
    std::optional<mesh::Advertisement> ad;  // the newest verified one
    std::string error;                      // why the last ask failed ("" when it did not)
    mesh::UnixMs fetched_at_ms = 0;  // when the newest answer or push came
    bool pushed = false;             // the last one came as a push (advertisement.push)
    double rtt_ms = 0;
    std::string path;  // the link's best path ("direct 127.0.0.1:...", "relay ...")
  };

 private:
  struct Held;
  // Asks every paired peer; `done` once all answered or failed.
  void refresh(std::function<void()> done);
  // `only`: just the providers listed in it (?group=).
  nlohmann::json capacity_json(mesh::UnixMs now, const mesh::Membership* only = nullptr) const;
  mesh::Snapshot snapshot(mesh::UnixMs now) const;
  Result<mesh::Membership> group_list(const std::string& name_or_id) const;
  void lease_call(const std::string& provider, const nlohmann::json& params, api::Answer reply, const char* method);
  void renew_later(std::shared_ptr<Held> held);
  void forget(const std::string& key);

  boost::asio::io_context& io_;
  reach::Peers& link_;
  MeshSettings settings_;
  const jobs::metering::Credits* credits_ = nullptr;
  const Groups* groups_ = nullptr;
  MeshOpinions* opinions_ = nullptr;
  std::map<PublicKeyBytes, Known> known_;
  std::map<std::string, std::shared_ptr<Held>> held_;  // "provider/lease id" -> renewal state
  uint64_t next_request_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
