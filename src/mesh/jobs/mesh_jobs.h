// Mesh jobs that survive a provider: the
// consumer's supervisor for `yonder run --mesh --retries N`. A mesh job is
// the user's job; an attempt is one run of it on one provider. The
// supervisor places the job (MeshConsumer's lease), uploads and submits it
// (RemoteConsumer's run path), binds the lease, then watches the provider's
// job until it ends:
//
//   placing -> lease -> upload + run.submit -> mesh.bind -> running
//     running --(run.inspect answers "ended", exit 0)--> succeeded
//     running --(ended, non-zero exit, retries left)--> a new attempt elsewhere
//     running --(no answer for mesh.provider_timeout_s)--> "lost": a new
//              attempt elsewhere (at most mesh.max_requeues times)
//
// A requeue excludes the providers that lost or failed the job while any
// other provider can take it. While an attempt runs, whatever the job keeps
// in `checkpoint/` under its workspace is fetched every
// mesh.checkpoint_interval_s into $YONDER_HOME/mesh-jobs/<id>/checkpoint/;
// a new attempt starts from the original upload plus that folder (the
// checkpoint contract: docs/cli.md, "Checkpoints and requeue").
//
// `replicas` K > 1 (`--replicas K`, BOINC-style redundant execution): K
// replicas run at once on K distinct providers, each requeued or retried
// on its own (never from a checkpoint: replicas stay independent). An
// attempt that exits (any code) is that replica's answer. When all have
// answered or given up, each answer's outputs and log come home into
// $YONDER_HOME/mesh-jobs/<id>/replica-N and are digested here
// (mesh/jobs/mesh_replicas.h), or judged by the "validator" command run in that
// folder (exit 0 accepts); mesh::decide_quorum over the providers decides,
// and a hash needs a strict majority of the K asked. The result names the
// winning attempt (its outputs are the ones that come home) and every
// replica's hash; each provider is recorded as agreed or outvoted in the
// Verifications store (jobs/metering/verifications.h). No majority: the job fails
// with "no quorum" and nobody is outvoted.
//
// A job is written to SQLite (mesh/jobs/mesh_job_store.h) before its id is
// handed back, and every attempt before it is acted on; on start the
// supervisor picks up the jobs a previous daemon left running (it watches
// their provider job again, or places them again if they had none).
//
// Local routes:
//   POST /v1/mesh/jobs {"job": JobRequest, "dir"?, "needs"?: lease body,
//                       "retries"?: 0..100, "replicas"?: 1..9, "validator"?: CMD}
//                                  -> the mesh job (id, state, attempts)
//   GET  /v1/mesh/jobs[?all=1]     the mesh jobs (running ones; all)
//   GET  /v1/mesh/jobs/inspect?id=ID   one, with its attempts and result
//   POST /v1/mesh/jobs/stop {"mesh_job_id"}  stops the current attempt; no requeue
//
// The decisions (when an attempt is lost, requeued, retried, given up; what
// to exclude; when the job finishes or its quorum runs) are made by the pure
// core in mesh/jobs/supervisor_core.h, whose opening comment states the
// policy; this class feeds it events with the injected clock's now and does
// the I/O its actions name, through AttemptServices (mesh/jobs/attempt_services.h).
// Its time and timers are injected (base/loop_timers.h), so the whole
// service runs in the simulation (tests/sim/mesh_jobs_sim_test.cpp).
//
// Threading: everything on the event loop; SQLite and file copies on the
// `blocking` executor (the daemon's pool), their results posted back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <boost/asio/any_io_executor.hpp>

#include "api/module.h"
#include "api/answer.h"
#include "base/loop_timers.h"
#include "mesh/jobs/attempt_services.h"
#include "api/server.h"
#include "config/config.h"
#include "jobs/protocol/job_request.h"
#include "mesh/jobs/mesh_job_store.h"
#include "mesh/jobs/supervisor_core.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace yonder::jobs::metering {
class Verifications;
}

namespace yonder::mesh {

struct MeshJobSettings {
  std::chrono::milliseconds provider_timeout{60'000};     // mesh.provider_timeout_s
  uint32_t max_requeues = 3;                              // mesh.max_requeues
  std::chrono::milliseconds checkpoint_interval{30'000};  // mesh.checkpoint_interval_s
};
Result<MeshJobSettings> mesh_job_settings_from_config(const config::Config& cfg);

// A mesh job as the consumer asks for it: POST /v1/mesh/jobs decoded by
// parse_mesh_job_spec, or built by mesh arrays for each task.
struct MeshJobSpec {
  jobs::protocol::JobRequest job;
  std::string dir;                                   // uploaded with each attempt: absolute, "" for none
  nlohmann::json needs = nlohmann::json::object();  // the lease body (mesh_consumer.h's lease_for)
  uint64_t retries = 0;                              // reruns of a failing attempt
  uint64_t replicas = 1;                             // K independent runs judged by a quorum
  std::string validator;                             // judges a replica's outputs; "" compares digests
  bool outputs_unlimited = false;                    // "outputs_limit": "off" (run --no-outputs-limit)
};
// The route's body ({"job", "dir"?, "needs"?, "retries"?, "replicas"?,
// "validator"?, "outputs_limit"?}); kInvalidArgument names the field.
Result<MeshJobSpec> parse_mesh_job_spec(const nlohmann::json& body);

class MeshJobs : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh jobs"; }
  // `dir`: where jobs keep their checkpoints and staged uploads
  // ($YONDER_HOME/mesh-jobs). `blocking`: where SQLite and file work runs
  // (the daemon's pool). `timers`, `link` and `attempts` outlive this object.
  MeshJobs(boost::asio::io_context& io, boost::asio::any_io_executor blocking, LoopTimers& timers,
           reach::Peers& link, AttemptServices& attempts, std::unique_ptr<MeshJobStore> store, std::string dir,
           MeshJobSettings settings);
  ~MeshJobs();
  // Picks up the jobs a previous run left unfinished (reads on the pool).
  Status start() override;
  void add_routes(api::Router& router) override;
  // The routes' services, as mesh arrays (mesh_arrays.h) call them; each
  // `answer` (event loop) gets what the route answers. `id`: a mesh job id
  // or a prefix of one.
  void create(MeshJobSpec spec, api::Answer answer);
  void inspect(const std::string& id, api::Answer answer);
  void stop_job(const std::string& id, api::Answer answer);
  // Where replica outcomes are recorded (agreed / outvoted per provider);
  // unset: not recorded. Must outlive this object.
  void set_verifications(jobs::metering::Verifications* v) { verifications_ = v; }

  struct Live;

 private:
  struct Slot;
  struct Answer;
  std::shared_ptr<Live> make_live(MeshJobRow row);
  // Replica `r` (0 for a plain job): lease, upload + submit, watch.
  void place(const std::shared_ptr<Live>& live, int r);
  void submit(const std::shared_ptr<Live>& live, int r, const nlohmann::json& lease);
  void watch(const std::shared_ptr<Live>& live, int r);
  void tick(const std::shared_ptr<Live>& live, int r);
  void sync_checkpoint(const std::shared_ptr<Live>& live, int r);
  void attempt_ended(const std::shared_ptr<Live>& live, int r, const nlohmann::json& view);
  // The decisions (supervisor_core.h): the job's state goes to the core with
  // `event` and the steady clock's now, comes back, and the actions are done.
  supervisor::Step run(const std::shared_ptr<Live>& live, const supervisor::Event& event);
  supervisor::JobState core_state(const Live& live) const;
  void adopt(Live& live, const supervisor::JobState& state);
  void apply(const std::shared_ptr<Live>& live, const std::vector<supervisor::Action>& actions);
  // Replicas: once every one has answered (or given up), their outputs
  // come home into replica-N folders, are digested (mesh/jobs/mesh_replicas.h)
  // and the quorum decides (mesh::decide_quorum).
  void maybe_verify(const std::shared_ptr<Live>& live);
  void verify(const std::shared_ptr<Live>& live);
  void gather(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i);
  void read_log(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i,
                uint64_t offset);
  void digest(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i);
  void decide(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers);
  void finish(const std::shared_ptr<Live>& live, const std::string& state, nlohmann::json result);
  // Writes the job row and its attempts (in order, on the pool), then `then` on the loop.
  void save(const std::shared_ptr<Live>& live, std::function<void()> then = nullptr);
  nlohmann::json view(const Live& live) const;
  static nlohmann::json result_of(const MeshAttempt& a);
  std::string job_dir(const std::string& id) const { return dir_ + "/" + id; }

  boost::asio::io_context& io_;
  boost::asio::any_io_executor blocking_;
  LoopTimers& timers_;
  reach::Peers& link_;
  AttemptServices& attempts_;
  std::shared_ptr<MeshJobStore> store_;
  std::string dir_;
  MeshJobSettings settings_;
  jobs::metering::Verifications* verifications_ = nullptr;
  std::map<std::string, std::shared_ptr<Live>> live_;  // running jobs by id
  // Store writes run in order (a strand on the pool): a later save of a job
  // never lands before an earlier one.
  struct Writer;
  std::unique_ptr<Writer> writer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
