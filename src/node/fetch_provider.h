// The provider's side of bringing files home from a job's workspace:
//
//   run.fetch (tunnel) {"job_id", "paths"?: [relative paths], "have"?: {path: [size, sha256]}}
//       -> {"files", "bytes", "skipped"}, then the archive (transfer/archive.h)
//          as raw bytes on the tunnel, then a half-close
//
// Owner-only like every run.* method ("not found" to anyone else), and only
// once the job has ended: the container is gone, so nothing can swap a
// folder for a symbolic link while the files are read. The ended job's
// workspace image is loop-mounted for the fetch (nosuid,nodev) and unmounted
// after the last fetch of it. Files whose size and SHA-256 match "have" are
// left out (the consumer has them). Bounded by jobs.max_disk_mib.
//
// Threading: the handler runs on the event loop; listing, hashing, packing
// and mounting on the pool. One chunk in flight: the next is read only when
// the tunnel has taken the previous one (the mux window paces the reads).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "config/config.h"
#include "node/peer_link.h"
#include "node/provider_service.h"
#include "node/remote_provider.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::node {

class FetchProvider {
 public:
  FetchProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, PeerLink& link, ProviderService& provider,
                RemoteProvider& audit, const config::Config& cfg, std::string jobs_dir);
  void register_methods();

 private:
  struct Pump;
  void fetch(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);
  void pump(const std::shared_ptr<Pump>& p);
  void finish(const std::shared_ptr<Pump>& p, const Status& result);
  // Pool: the job's workspace folder, mounted if need be (counted).
  Result<std::string> acquire_workspace(const std::string& job_id);
  void release_workspace(const std::string& job_id);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  PeerLink& link_;
  ProviderService& provider_;
  RemoteProvider& audit_;
  uint64_t max_bytes_;
  std::string jobs_dir_;

  struct Mount {
    int users = 0;
    bool ours = false;  // we mounted it (and unmount it after the last user)
  };
  std::mutex mutex_;  // guards mounts_
  std::map<std::string, Mount> mounts_;
};

}  // namespace yonder::node
