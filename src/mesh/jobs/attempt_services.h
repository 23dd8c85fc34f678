// What the mesh supervisor (mesh/jobs/mesh_jobs.h) needs of the rest of the
// consumer to run one attempt: a lease on a provider, the job's upload and
// submission, calls on the job it submitted, and its files brought home.
// MeshJobs takes this narrow interface instead of the three services, so
// the whole supervisor (its state, its store, its timers) runs over the
// simulated network with a stand-in for them (tests/sim/sim_attempts.h);
// ServiceAttempts is the real one, over MeshConsumer, RemoteConsumer and
// FetchConsumer. Every answer comes on the event loop.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/answer.h"
#include "base/strong_id.h"
#include "jobs/protocol/job_request.h"
#include "net/reach/peers.h"

namespace yonder::jobs::consumer {
class RemoteConsumer;
}
namespace yonder::jobs::files {
class FetchConsumer;
}

namespace yonder::mesh {

class MeshConsumer;

class AttemptServices {
 public:
  virtual ~AttemptServices() = default;
  // A lease on a provider that meets `needs` (a lease body, with "exclude"
  // for providers to leave out): {"provider": {"node_id", "name"},
  // "lease_id"}, or why none could be had.
  virtual void lease_for(nlohmann::json needs, api::Answer answer) = 0;
  virtual void bind_lease(const PeerId& provider, LeaseId lease, const JobId& job, api::Answer answer) = 0;
  virtual void release_lease(const PeerId& provider, LeaseId lease, api::Answer answer) = 0;
  // Uploads `dir` ("" for nothing) and submits `job` to `target`: the
  // provider's view of the job ({"job_id", "state", ...}).
  virtual void submit(const reach::Peers::Target& target, const jobs::protocol::JobRequest& job,
                      const std::string& dir, const std::string& transfer_id, api::Answer answer) = 0;
  // `method` (run.inspect, run.stop, run.logs) on a job submitted here;
  // `record`: the consumer's record of the job is updated from the answer.
  virtual void call_job(const std::string& job_id, const std::string& method, nlohmann::json params, bool record,
                        api::Answer answer) = 0;
  // Brings files of a job home ({"job_id", "dir", "paths"?, ...}, as
  // POST /v1/jobs/fetch takes).
  virtual void fetch_into(nlohmann::json body, api::Answer answer) = 0;
};

class ServiceAttempts final : public AttemptServices {
 public:
  ServiceAttempts(MeshConsumer& mesh, jobs::consumer::RemoteConsumer& remote, jobs::files::FetchConsumer& fetch)
      : mesh_(mesh), remote_(remote), fetch_(fetch) {}
  void lease_for(nlohmann::json needs, api::Answer answer) override;
  void bind_lease(const PeerId& provider, LeaseId lease, const JobId& job, api::Answer answer) override;
  void release_lease(const PeerId& provider, LeaseId lease, api::Answer answer) override;
  void submit(const reach::Peers::Target& target, const jobs::protocol::JobRequest& job, const std::string& dir,
              const std::string& transfer_id, api::Answer answer) override;
  void call_job(const std::string& job_id, const std::string& method, nlohmann::json params, bool record,
                api::Answer answer) override;
  void fetch_into(nlohmann::json body, api::Answer answer) override;

 private:
  MeshConsumer& mesh_;
  jobs::consumer::RemoteConsumer& remote_;
  jobs::files::FetchConsumer& fetch_;
};

}  // namespace yonder::mesh
