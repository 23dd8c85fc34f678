// Array jobs over the mesh: the consumer's driver for
// `yonder run --mesh --array 0-N[%LIMIT]` (and `--array-file`). Each task
// attempt is one mesh job (mesh/jobs/mesh_jobs.h: placement, lease, upload,
// watch, requeue after a lost provider) with YONDER_ARRAY_INDEX (and
// YONDER_ARRAY_PARAM, the task's line of the parameter file) in its
// environment; mesh::ArrayRun (src/mesh/core/work_units.h) decides what runs:
// the limit, retries on another provider after a failure, speculative
// copies of stragglers near the end, first success wins.
//
// The shared input is the same folder for every task: uploads are
// content-addressed per provider, so a provider receives it once and later
// tasks there send only the manifest.
//
// A task's outputs (what it created or changed in its workspace, judged
// against the input folder) come home into OUT/out/<index>/ as soon as it
// succeeds, so a partial run is usable. A task that failed every try is
// marked failed; its last job and its logs stay on the provider
// (`yonder logs JOB`), named in the array's status.
//
// The array is written to SQLite (mesh/jobs/mesh_array_store.h) before its id is
// handed back and again as tasks finish (outputs home first); a restarted
// daemon resumes it: tasks done stay done, attempts still running are
// watched again.
//
// Local routes:
//   POST /v1/mesh/arrays {"job", "dir"?, "out", "needs"?, "array": "0-N[%L]"
//                         | "tasks": N, "limit"?, "params"?: [lines], "retries"?}
//   GET  /v1/mesh/arrays[?all=1]
//   GET  /v1/mesh/arrays/inspect?id=ID   counts by state, throughput, share per
//                                        provider, time left, failed tasks
//   POST /v1/mesh/arrays/retry  {"array_id"}   failed tasks run again
//   POST /v1/mesh/arrays/cancel {"array_id"}   nothing more starts; running
//                                              attempts are stopped
//
// Threading: everything on the event loop; SQLite on the pool (writes in
// order, coalesced per array).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "api/server.h"
#include "base/error.h"
#include "mesh/jobs/mesh_array_store.h"
#include "base/strong_id.h"
#include "mesh/jobs/mesh_jobs.h"
#include "mesh/core/work_units.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace yonder::mesh {

// What the array needs from the mesh job supervisor (mesh_jobs.h), as C++
// calls; answers on the event loop. An interface, so the array's tests can
// run it over a scripted supervisor.
class MeshTaskRunner {
 public:
  virtual ~MeshTaskRunner() = default;
  // POST /v1/mesh/jobs: the new job's view ({"mesh_job_id", ...}).
  virtual void create_job(MeshJobSpec spec, std::function<void(Result<nlohmann::json>)> done) = 0;
  // GET /v1/mesh/jobs/inspect: {"state", "attempts": [{"provider_id",
  // "provider_name", "job_id", "state", "exit_code"}], "result"}.
  virtual void inspect_job(const MeshJobId& id, std::function<void(Result<nlohmann::json>)> done) = 0;
  virtual void stop_job(const MeshJobId& id) = 0;
};

// The runner over this daemon's mesh job supervisor, by direct calls.
class MeshJobsRunner final : public MeshTaskRunner {
 public:
  explicit MeshJobsRunner(MeshJobs& jobs) : jobs_(jobs) {}
  void create_job(MeshJobSpec spec, std::function<void(Result<nlohmann::json>)> done) override;
  void inspect_job(const MeshJobId& id, std::function<void(Result<nlohmann::json>)> done) override;
  void stop_job(const MeshJobId& id) override;

 private:
  MeshJobs& jobs_;
};

class MeshArrays : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh arrays"; }
  static constexpr uint32_t kDefaultConcurrency = 16;  // at once when the array sets no limit
  static constexpr size_t kMaxParamBytes = 32 * 1024;  // one line of --array-file (an environment value's limit)

  // `blocking`: where SQLite and file work runs (the daemon's pool);
  // `files` brings each task's outputs home. `timers`, `runner` and `files`
  // outlive this object.
  MeshArrays(boost::asio::io_context& io, boost::asio::any_io_executor blocking, LoopTimers& timers,
             MeshTaskRunner& runner, AttemptServices& files, std::unique_ptr<MeshArrayStore> store,
             std::chrono::milliseconds tick = std::chrono::milliseconds(250));
  ~MeshArrays();
  // Resumes the arrays a previous run left running (reads on the pool).
  Status start() override;
  void add_routes(api::Router& router) override;

  struct Live;

 private:
  void create(const api::Request& req, api::Reply reply);
  void control(const api::Request& req, api::Reply reply, bool cancel);
  // A stored array as Live: its tasks' states and what it noted (failed
  // tasks, why it stopped); attempts that were running are not adopted.
  Result<std::shared_ptr<Live>> restore(MeshArrayRow row);
  void resume(MeshArrayRow row);
  void pump(const std::shared_ptr<Live>& live);
  void launch(const std::shared_ptr<Live>& live, const mesh::ArrayLaunch& l);
  void tick(const std::shared_ptr<Live>& live);
  void observe(const std::shared_ptr<Live>& live, uint64_t attempt, const nlohmann::json& view);
  void bring_home(const std::shared_ptr<Live>& live, uint32_t task, const std::string& job_id, bool second_look = false);
  void outputs_lost(const std::shared_ptr<Live>& live, uint32_t task, const std::string& why);
  void schedule(const std::shared_ptr<Live>& live);
  void save(const std::shared_ptr<Live>& live);
  void maybe_finish(const std::shared_ptr<Live>& live);
  nlohmann::json status(const Live& live) const;

  mesh::UnixMs unix_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(timers_.now().time_since_epoch()).count();
  }

  boost::asio::io_context& io_;
  boost::asio::any_io_executor blocking_;
  LoopTimers& timers_;
  MeshTaskRunner& runner_;
  AttemptServices& files_;
  std::shared_ptr<MeshArrayStore> store_;
  std::chrono::milliseconds tick_;
  std::map<std::string, std::shared_ptr<Live>> live_;  // by array id
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
