// Array jobs from the command line: `yonder run --mesh --array
// 0-N[%LIMIT]` (or `--array-file FILE`, one task per line) hands the array
// to the daemon (mesh/jobs/mesh_arrays.h) and follows it with a progress line
// until every task is done or failed; `yonder array status|list|retry|cancel`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/context.h"
#include "jobs/protocol/job_request.h"

namespace yonder::cli {

struct ArrayArgs {
  jobs::protocol::JobRequest job;  // each task gets YONDER_ARRAY_INDEX
  nlohmann::json needs;  // the /v1/mesh/lease body
  std::string dir;       // the shared input, uploaded once per provider ("" for none)
  std::string out;       // task outputs go to OUT/out/<index>/
  std::optional<std::string> range;  // "0-N[%LIMIT]"
  std::string file;                  // --array-file: one task per line
  int retries = 0;
  int replicas = 1;       // per task: K providers and a quorum (mesh/jobs/mesh_jobs.h)
  std::string validator;  // with replicas
  bool detach = false;
  bool no_outputs_limit = false;  // each task's outputs may pass outputs.max_files / max_mib
};

// The lines of an --array-file (one task each; "" lines count too, except
// a last empty one), bounded so the whole array fits one API request.
Result<std::vector<std::string>> read_array_file(const std::string& path);
// One line of an array's progress, as drawn (status JSON from the daemon).
std::string array_progress_line(const nlohmann::json& status);

// Exit: 0 when every task succeeded; 1 when some failed (named); 0 after -d.
int run_array(const Context& ctx, const ArrayArgs& args);
int cmd_array_status(const Context& ctx, const std::string& id);
int cmd_array_list(const Context& ctx, bool all);
int cmd_array_retry(const Context& ctx, const std::string& id);
int cmd_array_cancel(const Context& ctx, const std::string& id);

}  // namespace yonder::cli
