// The provider's side of copying files into a running job's workspace
// (`yonder cp LOCAL JOB:PATH`):
//
//   files.put (tunnel) {"job_id", "dir"}  -> {"job_id", "dir"}; then the
//       caller sends the archive (transfer/archive.h) and half-closes; we
//       answer one JSON line {"files", "bytes", "paths"} and half-close
//       (or reset the stream with the reason when the copy fails)
//
// LinkService has already checked that the caller's scope includes
// `files`. The job must be the caller's ("not found" to anyone else) and
// running. The workspace is being used by the untrusted job at the same
// time, so the archive is written with transfer::BeneathWriter: every path
// resolved beneath the workspace without following links, each file
// renamed into place from a fresh name (a link the job put there is
// replaced, never written through), and every file and folder made here
// given to the workspace's owner (the job's user) so the job can use it.
// Bounded by jobs.max_disk_mib (and the workspace's own size). Every copy
// and every refusal is audited, with the bytes that came in.
//
// Threading: the handler runs on the event loop; file writes on the pool,
// one chunk at a time: the tunnel is resumed only once a chunk is written
// (the mux window paces the caller).
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

class FilesProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "files into jobs (provider)"; }
  FilesProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit,
                WorkspaceMounts& mounts, const config::Config& cfg);
  void register_methods() override;

 private:
  struct Put;
  void put(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);
  void write_chunk(const std::shared_ptr<Put>& p, Bytes bytes);
  void finish(const std::shared_ptr<Put>& p);
  void fail(const std::shared_ptr<Put>& p, const Error& e);
  // Pool: drops the writer (and its half-written file) and the workspace.
  void release(const std::shared_ptr<Put>& p);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::ProviderService& provider_;
  jobs::provider::RemoteProvider& audit_;
  WorkspaceMounts& mounts_;
  uint64_t max_bytes_;
};

}  // namespace yonder::jobs::files
