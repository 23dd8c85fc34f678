// The consumer's side of remote jobs: local API routes that run jobs on a
// paired provider through the peer link, and remember which provider holds
// which job id (jobs::consumer::ConsumerJobStore).
//
//   POST /v1/jobs         {"peer", "job": JobRequest, "dir"?, "transfer_id"?}
//                                                              upload `dir` (if given), submit
//   GET  /v1/transfers[?id=ID]                                 uploads in flight and their progress
//   GET  /v1/jobs[?all=1]                                      jobs submitted from here, states refreshed
//   GET  /v1/jobs/inspect?id=ID                                one job, from its provider
//   GET  /v1/jobs/stats?id=ID                                  a running job's CPU, memory, GPU use now
//   POST /v1/jobs/stop    {"job_id"}
//   GET  /v1/jobs/logs?id=ID&offset=N[&wait_ms=T]              log records from offset N (long-poll;
//                                                              a follower's polls are answered from the
//                                                              job's pushed log stream, log_feeds.h)
//
// "dir" is read by this daemon (same user as the CLI, same machine): the
// upload streams from disk over the link and never passes through the API
// (jobs/files/upload_consumer.h: content-hashed, resumed after a dropped link).
// "transfer_id" (the caller's choice, at most 64 characters) names the
// upload in /v1/transfers so the caller can show its progress.
//
// Threading: routes run on the event loop; file and SQLite work on the pool.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "api/module.h"
#include "api/server.h"
#include "base/hook.h"
#include "base/strong_id.h"
#include "jobs/files/transfers.h"
#include "jobs/consumer/log_feeds.h"
#include "jobs/files/upload_consumer.h"
#include "jobs/protocol/job_request.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::jobs::consumer {

class RemoteConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "remote jobs (consumer)"; }
  RemoteConsumer(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                 std::unique_ptr<jobs::consumer::ConsumerJobStore> store, std::string hash_cache_dir);
  ~RemoteConsumer();
  void add_routes(api::Router& router) override;
  void stop() override;
  // The jobs submitted from here (for port forwarding's job lookups).
  std::shared_ptr<jobs::consumer::ConsumerJobStore> store() const { return store_; }
  // Uploads and downloads in flight (also used by the fetch routes).
  jobs::files::Transfers& transfers() { return transfers_; }
  // POST /v1/jobs as a C++ call (mesh/jobs/mesh_jobs.h): uploads `dir` (absolute;
  // "" for none) to `target`, submits `job`, remembers the job; `answer`
  // (event loop) gets the route's answer ({"job_id", ..., "upload"}) or why
  // it failed.
  // `name`: what this node calls the job ("" for none), already checked
  // free (claim_name).
  void submit(const reach::Peers::Target& target, const jobs::protocol::JobRequest& job, const std::string& dir,
              const std::string& transfer_id, std::function<void(Result<nlohmann::json>)> answer,
              const std::string& name = "");
  // Calls `method` (run.inspect, run.stop, run.logs) on the provider of job
  // `id` (submitted from here) with {"job_id"} + `params`; with `record`,
  // stores the returned view and answers the stored job's JSON. An end
  // seen here fires job_ended(), as the routes do.
  void call_job(const std::string& id, const std::string& method, nlohmann::json params, bool record,
                std::function<void(Result<nlohmann::json>)> answer);
  // Fired (event loop) with (provider_id, job_id) when this node learns
  // that a job it submitted ended (an inspect, stop, list or log read says
  // so), after the end is recorded: the metering receipt is fetched then
  // (jobs/metering/receipts_consumer.h). Subscribe before serving.
  Hook<PeerId, JobId>& job_ended() { return job_ended_; }

 private:
  // The log stream of a job from here reported its end: records the job's
  // view as seen now, then fires job_ended_.
  void seen_ending(const PeerId& provider, const JobId& job_id);
  void run(const api::Request& req, api::Reply reply);
  void list(const api::Request& req, api::Reply reply);
  // Whether `name` may name a new job (pool): well formed and not the name
  // of a job from here that has not ended, nor of one being submitted now.
  // Holds it until release_name(), so two runs cannot both take it.
  Status claim_name(const std::string& name);
  void release_name(const std::string& name);
  // Finds the job (pool), calls `method` on its provider with {"job_id"} +
  // `params`, records a returned view, and replies with the result.
  void forward(const std::string& id, const std::string& method, nlohmann::json params, bool record, api::Reply reply);
  // GET /v1/jobs/logs with a wait: from the job's log feed, or run.logs.
  void follow(const std::string& id, uint64_t offset, std::chrono::milliseconds wait, api::Reply reply);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> store_;
  jobs::files::UploadConsumer uploads_;
  jobs::files::Transfers transfers_;
  Hook<PeerId, JobId> job_ended_;
  LogFeeds log_feeds_;
  std::mutex naming_mutex_;
  std::set<std::string> naming_;  // names of jobs being submitted now
};

}  // namespace yonder::jobs::consumer
