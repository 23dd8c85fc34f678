// Reputation for placement: EigenTrust (mesh/core/reputation.h) over
// the group's receipts and verification outcomes, computed by this node.
//
// A node knows its own evidence: the receipts it countersigned or had
// countersigned (jobs/receipts/receipt_store.h) and the checks it made
// (jobs/metering/verifications.h). To see the group's, it asks each paired peer:
//
//   mesh.opinions {} -> {"opinions": "<mesh::Opinions JSON>"}
//       the answering node's own countersigned receipts (newest first) and
//       its verification outcomes, signed by it (mesh/core/verification.h),
//       bounded by mesh::kMaxOpinionItems each and mesh::kMaxOpinionsBytes.
//       Needs the `mesh` scope, like mesh.advertisement.
//
// The fetcher keeps only what verifies (mesh::verified_opinions: receipts
// with both signatures that name the sender; outcomes the sender signed)
// and drops the rest, counted. Pre-trusted peers: this node, plus the owner
// and admins of every group it is in (mesh/groups/groups.h). Trust is recomputed
// after each refresh (GET /v1/mesh asks for opinions along with the
// advertisements; and every few minutes, start()) and cached; placement reads the cached value scaled 0..1
// (the best-trusted peer is 1).
//
// Why a clique gains nothing: receipts its members sign among themselves
// are valid, and are counted, but they only add edges between clique
// members; trust enters the graph only at the pre-trusted peers, so with no
// honest member vouching for them (a countersigned receipt of real work, a
// passed benchmark) the clique's trust stays 0 (tests/node/reputation_test.cpp).
//
// Local route:
//   GET /v1/mesh/reputation[?refresh=0]  per peer: reputation (0..1), trust
//       (EigenTrust's global value), the latest benchmark; the pre-trusted
//       peers; per source peer what its opinions held and what was dropped.
//
// Threading: public methods on the event loop; SQLite and the computation
// on the pool.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "api/server.h"
#include "crypto/identity.h"
#include "jobs/metering/verifications.h"
#include "jobs/receipts/receipt_store.h"
#include "mesh/core/gpu_claims.h"
#include "mesh/core/membership.h"
#include "mesh/core/reputation.h"
#include "mesh/core/verification.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::mesh {

class Groups;

// This node's own evidence, newest first, at most `limit` of each
// (countersigned receipts that decode; verification rows). Blocking.
Result<mesh::Opinions> own_opinions(jobs::receipts::ReceiptStore& receipts,
                                    jobs::metering::Verifications& verifications,
                                    size_t limit = mesh::kMaxOpinionItems);
// `self`, plus the owner and the admins of each list.
std::vector<mesh::PeerKey> pre_trusted_peers(const mesh::PeerKey& self, const std::vector<mesh::Membership>& lists);
// EigenTrust over our own evidence and what each peer sent (already
// verified with mesh::verified_opinions).
mesh::TrustResult trust_from(const mesh::Opinions& own, const std::map<mesh::PeerKey, mesh::Opinions>& fetched,
                             const std::vector<mesh::PeerKey>& pre_trusted,
                             const mesh::TrustParams& params = mesh::TrustParams{});

class MeshOpinions : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh opinions"; }
  MeshOpinions(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link, const Identity& self,
               jobs::receipts::ReceiptStore& receipts, jobs::metering::Verifications& verifications);
  ~MeshOpinions();
  void register_methods() override;
  void add_routes(api::Router& router) override;
  // The groups whose owners and admins are pre-trusted (unset: this node alone).
  void set_groups(const Groups* groups) { groups_ = groups; }

  // start() refreshes every `interval` (0, the default: only on demand), so
  // placement's reputation does not wait for someone to run `yonder mesh`.
  // Set before start().
  void set_refresh_interval(std::chrono::seconds interval) { interval_ = interval; }
  Status start() override;
  // Asks every paired peer for its opinions, then recomputes trust; `done`
  // on the event loop once all answered or timed out.
  void refresh(std::function<void()> done);
  // Recomputes from what is cached (after this node recorded a check).
  void recompute(std::function<void()> done);
  // Placement's reputation of `peer`, 0..1 (0: unknown).
  double reputation(const mesh::PeerKey& peer) const;
  // {"reputation", "trust", "benchmark": the latest known-answer check of it or null,
  //  "opinions"?: {"receipts", "verifications", "dropped", "error"?} its last mesh.opinions answer}.
  nlohmann::json provider_json(const mesh::PeerKey& peer) const;
  // What this node's own GPU checks say of `peer`'s claims (mesh/core/gpu_claims.h).
  mesh::GpuClaim gpu_claim(const mesh::PeerKey& peer, const std::string& model) const;
  bool gpu_claims_verified(const mesh::Advertisement& ad) const;

 private:
  void schedule_refresh();
  struct Source {
    mesh::Opinions opinions;  // verified
    std::string error;        // the last ask's failure ("" when it answered)
  };
  void serve(link::RpcReply reply);
  nlohmann::json report() const;

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  const Identity& self_;
  jobs::receipts::ReceiptStore& receipts_;
  jobs::metering::Verifications& verifications_;
  const Groups* groups_ = nullptr;
  // Loop only.
  std::map<mesh::PeerKey, Source> sources_;
  std::map<mesh::PeerKey, double> reputation_;
  std::map<mesh::PeerKey, double> trust_;
  std::map<std::string, nlohmann::json> latest_benchmark_;  // by provider node id
  mesh::GpuClaims gpu_claims_;                              // by provider node id
  std::vector<mesh::PeerKey> pre_trusted_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::chrono::seconds interval_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
