// The consumer's side of a mesh job in a simulation: the real supervisor
// core (mesh/jobs/supervisor_core.h) decides, and this driver does what
// MeshJobs (mesh_jobs.cpp) does around it, over a node's real LinkService:
// it places a replica on a provider, submits it (run.submit), watches it
// (run.inspect each tick), asks a lost one to stop (run.stop), and feeds
// the answers (or their absence) back as the core's events, with the
// simulation's time as `now`. What it leaves out of MeshJobs: leases
// (MeshConsumer), uploads and checkpoints (RemoteConsumer, FetchConsumer),
// SQLite, the quorum's fetches.
//
// And the provider's side: SimRunProvider serves run.submit, run.inspect
// and run.stop on a provider node's LinkService with the answers
// jobs/provider/remote_provider.h gives (a job's view: job_id, state,
// exit_code), for jobs that run a set time of the simulation's clock and
// exit with the code their script or the provider's seeded failure rate
// gives. A TEST DOUBLE of the provider's job manager, not of the link.
//
// Event loop only; no real time: the simulation's clock moves when the test
// says so.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "mesh/jobs/supervisor_core.h"
#include "sim/sim_peers.h"

namespace yonder::sim {

namespace supervisor = mesh::supervisor;
using supervisor::MonoTime;

// The simulation's steady clock, shared by every node.
struct SimClock {
  MonoTime now{std::chrono::hours(1)};
};

class SimRunProvider {
 public:
  // `fail_rate`: the chance (0..1, from `seed`) that a job here exits 1
  // whatever its script says.
  SimRunProvider(SimNode& node, SimClock& clock, uint64_t seed, double fail_rate = 0)
      : node_(node), clock_(clock), rng_(seed), fail_rate_(fail_rate) {
    auto& link = node.peers->service();
    link.add_method("run.submit", [this](const PublicKeyBytes& peer, const nlohmann::json& p, link::RpcReply reply) {
      const nlohmann::json& job = p.contains("job") ? p["job"] : nlohmann::json::object();
      Job j;
      j.owner = peer;
      j.id = node_.name + "-job-" + std::to_string(jobs_.size() + 1);
      j.ends_at = clock_.now + std::chrono::milliseconds(job.value("run_ms", 1000));
      j.exit_code = job.value("exit_code", 0);
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
      if (clock_.now < it->second.ends_at) it->second.stopped = true;
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
    MonoTime ends_at{};
    int exit_code = 0;
    bool stopped = false;
  };
  nlohmann::json view(const Job& j) const {
    if (j.stopped) return {{"job_id", j.id}, {"state", "stopped"}, {"exit_code", nullptr}};
    if (clock_.now < j.ends_at) return {{"job_id", j.id}, {"state", "running"}, {"exit_code", nullptr}};
    return {{"job_id", j.id}, {"state", "exited"}, {"exit_code", j.exit_code}};
  }

  SimNode& node_;
  SimClock& clock_;
  std::mt19937_64 rng_;
  double fail_rate_;
  std::map<std::string, Job> jobs_;
};

class SimSupervisor {
 public:
  // `providers`: whom it may place on, in the order a lease would offer
  // them (the first not excluded wins).
  SimSupervisor(SimNode& consumer, std::vector<SimNode*> providers, SimClock& clock, supervisor::Settings settings,
                nlohmann::json job, uint64_t retries, int replicas = 1)
      : consumer_(consumer),
        providers_(std::move(providers)),
        clock_(clock),
        settings_(settings),
        job_(std::move(job)) {
    state_.retries_allowed = retries;
    state_.slots.resize(static_cast<size_t>(replicas));
  }
  ~SimSupervisor() { *alive_ = false; }
  SimSupervisor(const SimSupervisor&) = delete;
  SimSupervisor& operator=(const SimSupervisor&) = delete;

  // The job is created: every replica is placed.
  void start() {
    for (int r = 0; r < state_.replicas(); ++r) place(r);
  }
  // MeshJobs' tick for each replica: has its provider been silent too long,
  // has its placement retry come due; then a run.inspect of a running attempt.
  void tick() {
    for (int r = 0; r < state_.replicas(); ++r) {
      const auto& slot = state_.slots[static_cast<size_t>(r)];
      bool running = slot.current >= 0 && attempt(slot.current).state == supervisor::AttemptState::kRunning;
      bool retry_due = slot.place_again_at && clock_.now >= *slot.place_again_at;
      if (!running && !retry_due) continue;
      if (!run(supervisor::Tick{r}).actions.empty() || !running) continue;
      inspect(r);
    }
  }

  const supervisor::JobState& state() const { return state_; }
  const supervisor::Attempt& attempt(int i) const { return state_.attempts[static_cast<size_t>(i)]; }
  // Every FinishJob the core asked for (one, once the job is over).
  std::vector<supervisor::FinishJob> finished;
  // What happened, in order, one line each (for a failure's message).
  std::vector<std::string> trace;
  // When each attempt was lost (by attempt index).
  std::map<int, MonoTime> lost_at;

 private:
  supervisor::Step run(const supervisor::Event& event) {
    auto before = state_.attempts;
    auto step = supervisor::on_event(state_, event, clock_.now, settings_);
    state_ = step.state;
    for (size_t i = 0; i < state_.attempts.size(); ++i) {
      if (state_.attempts[i].state == supervisor::AttemptState::kLost &&
          (i >= before.size() || before[i].state != supervisor::AttemptState::kLost)) {
        lost_at[static_cast<int>(i)] = clock_.now;
        trace.push_back("attempt " + std::to_string(i) + " lost: " + state_.attempts[i].why);
      }
    }
    apply(step.actions);
    return step;
  }

  void apply(const std::vector<supervisor::Action>& actions) {
    for (const auto& action : actions) {
      if (const auto* stop = std::get_if<supervisor::StopAttempt>(&action)) {
        auto it = job_ids_.find(stop->attempt);
        if (it == job_ids_.end()) continue;
        auto t = consumer_.peers->target(attempt(stop->attempt).provider_id);
        if (!t) continue;
        consumer_.peers->call_within(*t, "run.stop", {{"job_id", it->second}}, settings_.provider_timeout,
                                     [](Result<nlohmann::json>) {});  // best effort, as MeshJobs
      } else if (const auto* p = std::get_if<supervisor::PlaceReplica>(&action)) {
        place(p->replica);
      } else if (const auto* fin = std::get_if<supervisor::FinishJob>(&action)) {
        finished.push_back(*fin);
        trace.push_back("finished " + fin->state + " " + fin->message);
      }
      // PlaceLater: tick() finds it due in the slot; SaveJob and
      // DecideQuorum: nothing is stored here and replicas are not judged.
    }
  }

  void place(int r) {
    auto p = supervisor::placement_for(state_, r);
    if (p.what != supervisor::Placement::What::kPlace) return;
    run(supervisor::PlacementStarted{r});
    SimNode* chosen = nullptr;
    for (SimNode* n : providers_) {
      if (p.exclude.count(n->id()) == 0) {
        chosen = n;
        break;
      }
    }
    if (chosen == nullptr) {
      run(supervisor::PlacementFailed{r, p.excluding_failed, "no provider can take it", "unavailable"});
      return;
    }
    supervisor::Attempt a;
    a.replica = r;
    a.provider_id = chosen->id();
    a.provider_name = chosen->name;
    a.state = supervisor::AttemptState::kUploading;
    size_t before = state_.attempts.size();
    run(supervisor::Placed{r, a});
    if (state_.attempts.size() == before) return;
    int n = static_cast<int>(before);
    trace.push_back("attempt " + std::to_string(n) + " on " + chosen->name);
    auto t = consumer_.peers->target(chosen->id());
    if (!t) {
      run(supervisor::SubmitFailed{r, t.error().message()});
      return;
    }
    consumer_.peers->call_within(
        *t, "run.submit", {{"job", job_}}, settings_.provider_timeout,
        [this, alive = alive_, r, n](Result<nlohmann::json> got) {
          if (!*alive) return;
          const auto& slot = state_.slots[static_cast<size_t>(r)];
          if (slot.current != n) return;
          if (!got) {
            trace.push_back("attempt " + std::to_string(n) + " not started: " + got.error().message());
            run(supervisor::SubmitFailed{r, got.error().message()});
            return;
          }
          job_ids_[n] = got->value("job_id", "");
          state_.attempts[static_cast<size_t>(n)].state = supervisor::AttemptState::kRunning;
          run(supervisor::ProviderAnswered{r});
        });
  }

  void inspect(int r) {
    int n = state_.slots[static_cast<size_t>(r)].current;
    auto t = consumer_.peers->target(attempt(n).provider_id);
    if (!t) return;
    consumer_.peers->call_within(
        *t, "run.inspect", {{"job_id", job_ids_[n]}}, settings_.provider_timeout,
        [this, alive = alive_, r, n](Result<nlohmann::json> got) {
          if (!*alive) return;
          const auto& slot = state_.slots[static_cast<size_t>(r)];
          if (!got || state_.finished || slot.current != n || attempt(n).state != supervisor::AttemptState::kRunning) {
            return;  // no answer: silence, which the next ticks judge
          }
          run(supervisor::ProviderAnswered{r});
          auto ended = supervisor::parse_attempt_state(got->value("state", ""));
          if (!supervisor::job_ended(ended)) return;
          supervisor::AttemptEnded e;
          e.replica = r;
          e.state = ended;
          if ((*got)["exit_code"].is_number_integer()) e.exit_code = (*got)["exit_code"].get<int>();
          trace.push_back("attempt " + std::to_string(n) + " " + got->value("state", "") +
                          (e.exit_code ? " " + std::to_string(*e.exit_code) : ""));
          run(e);
        });
  }

  SimNode& consumer_;
  std::vector<SimNode*> providers_;
  SimClock& clock_;
  supervisor::Settings settings_;
  nlohmann::json job_;
  supervisor::JobState state_;
  std::map<int, std::string> job_ids_;  // by attempt index
  // Calls still in flight when it is gone (the network outlives it) find it gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::sim
