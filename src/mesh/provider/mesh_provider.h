// The provider's side of the mesh: what this node offers its
// peers and the lease book that keeps two consumers off the same GPU.
//
//   mesh.advertisement {}                   -> {"advertisement": "<signed mesh::Advertisement JSON>"}
//   mesh.lease         {"message": "<mesh::LeaseMessage JSON>"}
//                      offer -> accept | refuse; renew -> accept | error; release -> {"released"}
//   mesh.bind          {"lease_id", "job_id"} -> {"bound"}
//                      the lease now belongs to that job (one the caller
//                      submitted here): it lasts while the job does and is
//                      released when the job ends, with no renewals.
//
// Pushes: besides answering mesh.advertisement, the provider sends its
// signed advertisement to every paired peer it grants `mesh`
// (advertisement.push, answered by mesh/consumer/mesh_consumer.h, which verifies it as
// it does a pulled one) about a second after something it shows changed (a
// job submitted or ended, a lease granted, bound, released or expired: one
// push for a burst) and every mesh.advertisement_push_s (0: no pushes), so a
// consumer's snapshot is fresh without asking.
//
// The advertisement is built on each request from the GPU inventory (a
// Slurm provider's cluster inventory, else this host's), the job manager
// (queued jobs; devices its jobs hold count as leased), the lease book,
// `executor.backend` and `mesh.labels`, and signed with the node's key; it is
// fresh for `mesh.advertisement_ttl_s`.
//
// The book lives in memory. Restart safety: a restarted yonderd must not
// grant a device an earlier run leased to someone else. Leases not yet
// bound to a job are the only ones a restart could forget (a bound lease's
// job is re-adopted by the job manager, whose own GPU leases keep the device
// taken), so the latest expiry of those is kept in one small file
// (`mesh-lease-horizon`, Unix ms) and until then a restarted provider
// refuses offers as busy (retry after the horizon) and advertises its
// devices as leased. A file, not a database table: one number, written
// before the accept is sent.
//
// Devices the job manager holds for jobs outside the mesh count as leased
// (busy). The job manager still picks its own devices for a mesh job (the
// same number, with the request's VRAM); the book is the admission control
// that keeps the count of leased devices within what the provider has.
//
// Threading: handlers and the book on the event loop; inventory, job
// manager and the horizon file on the pool. on_job_end from any thread.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "config/config.h"
#include "crypto/identity.h"
#include "gpu/inventory.h"
#include "jobs/provider/provider_service.h"
#include "mesh/core/advertisement.h"
#include "mesh/core/lease_book.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::mesh {

struct MeshSettings {
  std::map<std::string, std::string> labels;  // mesh.labels
  uint64_t lease_term_ms = 60'000;            // mesh.lease_term_s
  uint64_t offer_timeout_ms = 5'000;          // mesh.offer_timeout_ms
  uint64_t advertisement_ttl_ms = 120'000;    // mesh.advertisement_ttl_s
  uint64_t advertisement_push_ms = 30'000;    // mesh.advertisement_push_s; 0: no pushes
  std::string backend;                        // executor.backend
};
Result<MeshSettings> mesh_settings_from_config(const config::Config& cfg);

class MeshProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh (provider)"; }
  MeshProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
               jobs::provider::ProviderService& provider, gpu::GpuInventory& inventory, const Identity& identity,
               MeshSettings settings, std::string horizon_file);
  ~MeshProvider();
  // Reads the horizon a previous run left (blocking, once, before serving).
  Status start() override;
  void register_methods() override;
  // A job ended (its final view; any thread): its lease, if bound, is released.
  void on_job_end(const nlohmann::json& view);
  // What the advertisement shows may have changed (e.g. a job was
  // submitted): pushes it within about a second (debounced). Any thread.
  void changed();

 private:
  // What the pool learns for an advertisement or an offer.
  struct Devices {
    std::vector<mesh::GpuOffer> gpus;  // leased: held by the job manager
    uint32_t queued = 0;
  };
  void with_devices(std::function<void(Result<Devices>)> then);
  // The signed advertisement as it stands (event loop).
  void advertise(std::function<void(Result<mesh::Advertisement>)> then);
  // Sends it to every paired peer granted `mesh` (advertisement.push).
  void push_now();
  void push_later(std::chrono::milliseconds after, bool periodic);
  void answer(const PublicKeyBytes& peer, const mesh::LeaseMessage& m, link::RpcReply reply);
  void bind(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply);
  // Writes the horizon if `expires_at_ms` is past it; `then` once on disk (or not).
  void raise_horizon(mesh::UnixMs expires_at_ms, std::function<void()> then);
  void collect(mesh::UnixMs now_ms);
  mesh::UnixMs now_ms() const;

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::ProviderService& provider_;
  gpu::GpuInventory& inventory_;
  const Identity& identity_;
  MeshSettings settings_;
  std::string horizon_file_;
  mesh::UnixMs hold_until_ms_ = 0;  // a previous run's unbound leases may last until then
  mesh::UnixMs horizon_ms_ = 0;     // written to horizon_file_
  mesh::LeaseBook book_;
  std::map<uint64_t, std::string> bound_;         // lease id -> job id
  std::map<std::string, uint64_t> lease_of_job_;  // job id -> lease id
  std::set<std::string> ended_;                   // recently ended job ids (a bind racing the end)
  std::deque<std::string> ended_order_;
  std::unique_ptr<boost::asio::steady_timer> debounce_, periodic_;
  bool push_pending_ = false;  // debounce_ is armed
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
