// A TEST DOUBLE of the provider's job manager for simulations: serves
// run.submit, run.inspect and run.stop on a provider node's real
// LinkService with the answers jobs/provider/remote_provider.h gives (a
// job's view: job_id, state, exit_code), for jobs that run a set time of
// the simulation's clock and exit with the code their command names, or 1
// at the provider's seeded failure rate. The job's command is
// ["sim-job", RUN_MS, EXIT_CODE] (sim_attempts.h's sim_job builds one).
//
// Event loop only; no real time: the simulation's clock moves when the test
// says so.
#pragma once

#include <chrono>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "base/loop_timers.h"
#include "sim/sim_peers.h"

namespace yonder::sim {

class SimRunProvider {
 public:
  // `fail_rate`: the chance (0..1, from `seed`) that a job here exits 1
  // whatever its command says.
  SimRunProvider(SimNode& node, const LoopTimers& clock, uint64_t seed, double fail_rate = 0)
      : node_(node), clock_(clock), rng_(seed), fail_rate_(fail_rate) {
    auto& link = node.peers->service();
    link.add_method("run.submit", [this](const PublicKeyBytes& peer, const nlohmann::json& p, link::RpcReply reply) {
      const nlohmann::json job = p.contains("job") ? p["job"] : nlohmann::json::object();
      const nlohmann::json command = job.contains("command") ? job["command"] : nlohmann::json::array();
      if (!command.is_array() || command.size() != 3 || command[0] != "sim-job") {
        return reply(make_error(ErrorCode::kInvalidArgument, "the sim runs [\"sim-job\", RUN_MS, EXIT_CODE] only"));
      }
      Job j;
      j.owner = peer;
      j.id = node_.name + "-job-" + std::to_string(jobs_.size() + 1);
      j.ends_at = clock_.steady_now() + std::chrono::milliseconds(std::stoll(command[1].get<std::string>()));
      j.exit_code = std::stoi(command[2].get<std::string>());
      if (std::bernoulli_distribution(fail_rate_)(rng_)) j.exit_code = 1;
      ++submitted;
      jobs_[j.id] = j;
      reply(view(jobs_[j.id]));
    });
    link.add_method("run.inspect", [this](const PublicKeyBytes& peer, const nlohmann::json& p, link::RpcReply reply) {
      auto it = jobs_.find(p.value("job_id", ""));
      if (it == jobs_.end() || it->second.owner != peer) {
        return reply(make_error(ErrorCode::kNotFound, "no such job"));
      }
      reply(view(it->second));
    });
    link.add_method("run.stop", [this](const PublicKeyBytes& peer, const nlohmann::json& p, link::RpcReply reply) {
      auto it = jobs_.find(p.value("job_id", ""));
      if (it == jobs_.end() || it->second.owner != peer) {
        return reply(make_error(ErrorCode::kNotFound, "no such job"));
      }
      if (clock_.steady_now() < it->second.ends_at) it->second.stopped = true;
      ++stops;
      reply(view(it->second));
    });
  }

  int submitted = 0;
  int stops = 0;

 private:
  struct Job {
    PublicKeyBytes owner{};
    std::string id;
    LoopTimers::SteadyTime ends_at{};
    int exit_code = 0;
    bool stopped = false;
  };
  nlohmann::json view(const Job& j) const {
    if (j.stopped) return {{"job_id", j.id}, {"state", "stopped"}, {"exit_code", nullptr}};
    if (clock_.steady_now() < j.ends_at) return {{"job_id", j.id}, {"state", "running"}, {"exit_code", nullptr}};
    return {{"job_id", j.id}, {"state", "exited"}, {"exit_code", j.exit_code}};
  }

  SimNode& node_;
  const LoopTimers& clock_;
  std::mt19937_64 rng_;
  double fail_rate_;
  std::map<std::string, Job> jobs_;
};

}  // namespace yonder::sim
