// The provider's side of remote jobs: the link methods a paired peer calls
// to run jobs here, wired to the provider job manager (ProviderService).
//
//   run.upload  (tunnel, jobs/files/upload_provider.h)        -> an upload_id for run.submit
//   run.submit  {"job": JobRequest, "upload_id"?}       -> the job's view
//   run.list    {}                                      -> {"jobs": [views]}
//   run.inspect {"job_id"}                              -> view
//   run.stop    {"job_id"}                              -> view
//   run.logs    {"job_id", "offset", "wait_ms"?}        -> {"records", "next_offset", "ended"}
//   run.logs.follow (tunnel) {"job_id", "offset"}       -> each run.logs reply pushed as the log grows
//                                                         (link messages), until the job's end
//
// LinkService has already checked that the caller's scope includes `run`.
// Here the job is held to the rest of that scope (GPUs, VRAM, time, jobs,
// CPUs, memory, disk, egress), on top of the provider's own jobs.* limits.
// A job belongs to the peer that submitted it: to anyone else it does not
// exist ("not found", never "forbidden", so ids do not leak).
//
// Every request that is acted on or refused (and every job's end) is
// written to the audit log (jobs/audit/audit_log.h); reads that succeed
// (list, inspect, logs) are not, so a follower does not flood it.
//
// Threading: handlers are called on the event loop; blocking work (SQLite,
// Docker, files) goes to the pool and the reply is posted back.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "api/module.h"
#include "base/hook.h"
#include "config/config.h"
#include "jobs/audit/audit_log.h"
#include "jobs/provider/provider_service.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::provider {

class RemoteProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "remote jobs (provider)"; }
  RemoteProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                 ProviderService& provider, std::string uploads_dir);
  ~RemoteProvider();
  RemoteProvider(const RemoteProvider&) = delete;
  RemoteProvider& operator=(const RemoteProvider&) = delete;
  // Registers the run.* methods on the link (replacing its placeholders).
  void register_methods() override;
  // Where requests are recorded (owned by the daemon; may be null).
  void set_audit(audit::AuditLog* audit) { audit_ = audit; }
  // Fired with each finished job's view, on the thread that settled it and
  // under the job manager's lock (its rules: provider_jobs.h), before the
  // end is visible to anyone: the metering receipt is written then
  // (jobs/metering/receipts_provider.h) and the mesh lease released.
  // Subscribe before the first request.
  Hook<nlohmann::json>& job_ended() { return job_ended_; }
  // A job was accepted (run.submit); fired on the event loop. Subscribe before serving.
  Hook<>& job_submitted() { return job_submitted_; }
  // Appends an audit entry on the pool (any thread). `peer_id` is the actor.
  void record(const std::string& peer_id, const std::string& action, const std::string& subject, nlohmann::json detail);
  // The same, written before it returns (a worker thread, never the event
  // loop): for what must be in the log before the peer hears the answer.
  void record_now(const std::string& peer_id, const std::string& action, const std::string& subject,
                  const nlohmann::json& detail);

  // Upload bookkeeping (any thread).
  void add_upload(const std::string& id, const std::string& peer_id, const std::string& dir);
  // The upload's folder if it exists and belongs to `peer_id`; it is taken.
  Result<std::string> take_upload(const std::string& id, const std::string& peer_id);
  // Deletes uploads no job claimed within the hour.
  void prune_uploads();

 private:
  void submit(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply);
  void logs(const std::string& peer_id, const nlohmann::json& params, link::RpcReply reply);
  // run.logs.follow: a first read (whose refusal refuses the tunnel, as
  // run.logs would), then a long poll after each push, each answer pushed.
  void follow_logs(const std::string& peer_id, const nlohmann::json& params, link::TunnelAccept accept);
  // provider_.ready(), and hooks the manager's job ends into the audit log.
  Result<jobs::provider::ProviderJobs*> ready();

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  ProviderService& provider_;
  std::string uploads_dir_;
  audit::AuditLog* audit_ = nullptr;
  Hook<nlohmann::json> job_ended_;
  Hook<> job_submitted_;
  std::atomic<jobs::provider::ProviderJobs*> hooked_{nullptr};

  struct Upload {
    std::string peer_id;
    std::string dir;
    int64_t created_at = 0;
  };
  std::mutex mutex_;  // guards uploads_
  std::map<std::string, Upload> uploads_;
};

}  // namespace yonder::jobs::provider
