// The provider's side of bringing files home from a job's workspace:
//
//   run.fetch (tunnel) {"job_id", "paths"?: [relative paths], "have"?: {path: [size, sha256]}, "holes"?: true}
//       -> {"files", "bytes", "skipped", "links", "special"}, then the archive (transfer/archive.h)
//          as raw bytes on the tunnel, then a half-close
//
// Owner-only like every run.* method ("not found" to anyone else), for a
// running job (`yonder cp JOB:PATH` while it works) or an ended one
// (`yonder run`'s outputs, `cp` afterwards). A running job may rewrite its
// workspace while it is read, so every path is resolved beneath the
// workspace without following links (transfer/workspace_files.h): a link
// the job planted to a host file is refused or skipped, never read. An
// ended job's workspace image is loop-mounted for the fetch
// (jobs/files/workspace_mounts.h). Files whose size and SHA-256 match "have" are
// left out (the consumer has them). Bounded by jobs.max_disk_mib. With
// "holes" (a consumer that reads 'S' entries), files with holes go as their
// data extents only, and "bytes" counts data, not sizes.
//
// Threading: the handler runs on the event loop; listing, hashing, packing
// and mounting on the pool. One chunk in flight: the next is read only when
// the tunnel has taken the previous one (the mux window paces the reads).
#pragma once

#include <memory>
#include <string>

#include "api/module.h"
#include "config/config.h"
#include "jobs/files/workspace_mounts.h"
#include "jobs/provider/provider_service.h"
#include "jobs/provider/remote_provider.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::files {

class FetchProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "fetches (provider)"; }
  FetchProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit,
                WorkspaceMounts& mounts, const config::Config& cfg);
  void register_methods() override;

 private:
  struct Pump;
  void fetch(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);
  void pump(const std::shared_ptr<Pump>& p);
  void finish(const std::shared_ptr<Pump>& p, const Status& result);
  // Pool: lets go of the packer and the workspace (no audit entry).
  void finish_quietly(const std::shared_ptr<Pump>& p);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::ProviderService& provider_;
  jobs::provider::RemoteProvider& audit_;
  WorkspaceMounts& mounts_;
  uint64_t max_bytes_;
};

}  // namespace yonder::jobs::files
