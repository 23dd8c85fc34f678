// A stand-in for the consumer services the mesh supervisor runs attempts
// through (mesh/jobs/attempt_services.h), for simulations of the real
// MeshJobs: a lease is the first provider, in this consumer's order, that
// the request does not exclude (what MeshConsumer's placement picks when
// every provider scores alike), and a job is submitted, inspected and
// stopped with real calls over the consumer's link (sim_peers.h) to a
// provider's SimRunProvider. No uploads and no files: a fetch of named
// paths (a checkpoint) finds none, and a job's outputs are one file that
// "came home" without being written. A TEST DOUBLE of MeshConsumer, RemoteConsumer
// and FetchConsumer, not of the link or of MeshJobs.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/post.hpp>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/jobs/attempt_services.h"
#include "sim/sim_peers.h"

namespace yonder::sim {

// The job a SimRunProvider runs: `run_ms` of the simulation's time, then
// exit `exit_code`.
inline jobs::protocol::JobRequest sim_job(int64_t run_ms, int exit_code) {
  jobs::protocol::JobRequest job;
  job.image = "debian:12";
  job.command = {"sim-job", std::to_string(run_ms), std::to_string(exit_code)};
  return job;
}

class SimAttempts final : public mesh::AttemptServices {
 public:
  // `providers`: in the order leases offer them. `call_deadline`: how long
  // a call waits for its answer (the network answers a cut link at once).
  SimAttempts(SimNet& net, SimNode& consumer, std::vector<SimNode*> providers,
              std::chrono::milliseconds call_deadline = std::chrono::seconds(10))
      : net_(net), consumer_(consumer), providers_(std::move(providers)), deadline_(call_deadline) {}

  void lease_for(nlohmann::json needs, api::Answer answer) override {
    std::set<std::string> exclude;
    if (needs.contains("exclude") && needs["exclude"].is_array()) {
      for (const auto& e : needs["exclude"]) exclude.insert(e.get<std::string>());
    }
    Result<nlohmann::json> got = make_error(ErrorCode::kUnavailable, "no provider can take it");
    for (SimNode* n : providers_) {
      if (exclude.count(n->id()) != 0) continue;
      got = nlohmann::json{{"provider", {{"node_id", n->id()}, {"name", n->name}}}, {"lease_id", ++leases}};
      break;
    }
    later(std::move(answer), std::move(got));
  }
  void bind_lease(const PeerId&, LeaseId, const JobId&, api::Answer answer) override {
    ++bound;
    later(std::move(answer), nlohmann::json::object());
  }
  void release_lease(const PeerId&, LeaseId, api::Answer answer) override {
    ++released;
    later(std::move(answer), nlohmann::json::object());
  }
  void submit(const reach::Peers::Target& target, const jobs::protocol::JobRequest& job, const std::string&,
              const std::string&, api::Answer answer) override {
    consumer_.peers->call_within(target, "run.submit", {{"job", job.to_json()}}, deadline_,
                                 [this, target, answer = std::move(answer)](Result<nlohmann::json> got) {
                                   if (got) targets_[got->value("job_id", "")] = target;
                                   answer(std::move(got));
                                 });
  }
  void call_job(const std::string& job_id, const std::string& method, nlohmann::json params, bool,
                api::Answer answer) override {
    auto it = targets_.find(job_id);
    if (it == targets_.end()) {
      return later(std::move(answer), make_error(ErrorCode::kNotFound, "no job " + job_id + " submitted here"));
    }
    params["job_id"] = job_id;
    consumer_.peers->call_within(it->second, method, params, deadline_, std::move(answer));
  }
  void fetch_into(nlohmann::json body, api::Answer answer) override {
    ++fetches;
    if (body.contains("paths")) {
      return later(std::move(answer), make_error(ErrorCode::kNotFound, "the sim's jobs write no checkpoints"));
    }
    later(std::move(answer), nlohmann::json{{"files", {"result.txt"}}});
  }

  uint64_t leases = 0;
  int bound = 0;
  int released = 0;
  int fetches = 0;

 private:
  // Answers come on the loop after the call returns, as a real service's do.
  void later(api::Answer answer, Result<nlohmann::json> got) {
    boost::asio::post(net_.io, [answer = std::move(answer), got = std::move(got)]() mutable { answer(std::move(got)); });
  }

  SimNet& net_;
  SimNode& consumer_;
  std::vector<SimNode*> providers_;
  std::chrono::milliseconds deadline_;
  std::map<std::string, reach::Peers::Target> targets_;  // by the provider's job id
};

}  // namespace yonder::sim
