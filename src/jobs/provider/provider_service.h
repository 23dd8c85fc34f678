// The provider side of a node, as the daemon wires it: the executor backend
// chosen by executor.backend, the job manager, and the local API routes that
// show the provider's jobs to its own operator (peers use the run.* link
// methods, remote_provider.h):
//
//   GET  /v1/provider/executor                  fingerprint, queue and leases
//   POST /v1/provider/jobs                      submit (body: job request, optional "peer_id")
//   GET  /v1/provider/jobs[?id=ID]              list, or one job
//   POST /v1/provider/jobs/stop    {"job_id"}   stop (SIGTERM, grace, SIGKILL)
//   POST /v1/provider/jobs/remove  {"job_id"}   forget a finished job, its log and workspace
//   POST /v1/provider/jobs/exec    {"job_id", "command"}   run a command in it (no TTY)
//   GET  /v1/provider/jobs/logs?id=ID&offset=N[&max=B][&wait_ms=T]
//        records from offset N; with wait_ms, waits (an event, not a poll)
//        until there is output or the job ends
//
// The daemon never fails to start because Docker is down: the routes answer
// 503 with the reason, and the manager starts on the first request after
// Docker comes up.
#pragma once

#include <memory>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api/server.h"
#include "config/config.h"
#include "gpu/inventory.h"
#include "jobs/provider/provider_jobs.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::exec {
class Executor;
}

namespace yonder::jobs::provider {

class ProviderService {
 public:
  // Reads settings; Error only for invalid settings (the daemon refuses to
  // start with a bad config, as for every other setting).
  static Result<std::unique_ptr<ProviderService>> create(const config::Config& cfg, const config::Paths& paths,
                                                         gpu::GpuInventory& inventory, const std::string& owner);
  ~ProviderService();

  // Blocking (Docker, SQLite): recovery of jobs left by a previous run. A
  // failure is kept and reported by the routes; the next request retries.
  void start();
  void add_routes(api::Router& router, boost::asio::io_context& io, boost::asio::thread_pool& pool);
  // Blocking: stops watching jobs (containers keep running for the next start).
  void shutdown();
  // The manager once started; otherwise the error saying why it is not.
  // Blocking (it retries the start): worker threads only.
  Result<jobs::provider::ProviderJobs*> ready();
  // The GPUs jobs are placed on, when they are not this host's own: a Slurm
  // cluster's (from sinfo); nullptr for the Docker backend.
  gpu::GpuInventory* cluster_inventory() { return cluster_inventory_.get(); }
  // What jobs here run without, for consumers to see before they trust it
  // with their code and data; "" for the Docker backend's container.
  const std::string& isolation_notice() const { return isolation_notice_; }
  // The images jobs may use, as executor.image_allowlist's rules (empty
  // for the Slurm backend, which runs no image).
  const std::vector<std::string>& allowed_images() const { return allowed_images_; }
  // The job manager's queue order (ProviderJobs::set_queue_order); a no-op
  // when this node runs no provider jobs. Blocking (takes the manager's lock).
  void set_queue_order(
      std::function<std::vector<std::string>(const std::vector<jobs::provider::ProviderJobs::QueuedJob>&)> order);
  // ProviderJobs::set_limits; a no-op when this node runs no provider jobs. Blocking.
  void set_limits(int max_per_peer, int max_queued, int max_queued_per_peer);

 private:
  ProviderService() = default;

  std::unique_ptr<exec::Executor> executor_;
  std::unique_ptr<gpu::GpuInventory> cluster_inventory_;  // executor.backend slurm: the cluster's GPUs (sinfo)
  std::unique_ptr<jobs::provider::ProviderJobs> jobs_;
  std::string disabled_;  // executor.backend is none
  std::string isolation_notice_;
  std::vector<std::string> allowed_images_;
  std::mutex mutex_;      // guards started_ and start_error_
  bool started_ = false;
  std::string start_error_;
};

}  // namespace yonder::jobs::provider
