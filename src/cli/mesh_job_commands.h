// Mesh jobs from the command line: `yonder run
// --mesh --retries N` hands the job to the daemon's supervisor
// (mesh/jobs/mesh_jobs.h) and follows it: the output of the current attempt as
// it comes, a line on stderr when the job moves to another provider (lost
// provider, or a failed run retried), the outputs of the attempt that ended
// it brought home, and that attempt's exit code. `yonder mesh jobs` lists
// them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "jobs/protocol/job_request.h"

namespace yonder::cli {

struct MeshJobArgs {
  jobs::protocol::JobRequest job;
  nlohmann::json needs;          // the /v1/mesh/lease body (cli/mesh_commands.h mesh_lease_body)
  std::string dir;               // uploaded ("" for none)
  std::string home_dir;          // where outputs come home ("" for nowhere)
  std::vector<std::string> out;  // only these paths come home (empty: what differs)
  bool no_outputs_limit = false;  // past outputs.max_files / outputs.max_mib (run's --no-outputs-limit)
  int retries = 0;
  int replicas = 1;
  std::string validator;  // with replicas: run here in each replica's folder
  bool detach = false;
};

// Exit code as cmd_run's: the ending attempt's own; kExitCouldNotRun when
// no attempt ran to an end; 128 + signal when we stopped it; 0 after -d.
int run_mesh_job(const Context& ctx, const MeshJobArgs& args);
int cmd_mesh_jobs(const Context& ctx, bool all);

}  // namespace yonder::cli
