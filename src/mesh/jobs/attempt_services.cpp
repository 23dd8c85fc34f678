#include "mesh/jobs/attempt_services.h"

#include "jobs/consumer/remote_consumer.h"
#include "jobs/files/fetch_consumer.h"
#include "mesh/consumer/mesh_consumer.h"

namespace yonder::mesh {

void ServiceAttempts::lease_for(nlohmann::json needs, api::Answer answer) {
  mesh_.lease_for(std::move(needs), std::move(answer));
}

void ServiceAttempts::bind_lease(const PeerId& provider, LeaseId lease, const JobId& job, api::Answer answer) {
  mesh_.bind_lease(provider, lease, job, std::move(answer));
}

void ServiceAttempts::release_lease(const PeerId& provider, LeaseId lease, api::Answer answer) {
  mesh_.release_lease(provider, lease, std::move(answer));
}

void ServiceAttempts::submit(const reach::Peers::Target& target, const jobs::protocol::JobRequest& job,
                             const std::string& dir, const std::string& transfer_id, api::Answer answer) {
  remote_.submit(target, job, dir, transfer_id, std::move(answer));
}

void ServiceAttempts::call_job(const std::string& job_id, const std::string& method, nlohmann::json params,
                               bool record, api::Answer answer) {
  remote_.call_job(job_id, method, std::move(params), record, std::move(answer));
}

void ServiceAttempts::fetch_into(nlohmann::json body, api::Answer answer) {
  fetch_.fetch_into(std::move(body), std::move(answer));
}

}  // namespace yonder::mesh
