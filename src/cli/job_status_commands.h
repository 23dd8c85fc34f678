// What became of the jobs this node submitted, as docker users ask it:
// `ps`, `wait` and `inspect` (docs/cli.md). Each talks to the local daemon,
// which asks the job's provider over the link.
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

struct PsArgs {
  bool all = false;                  // ended jobs too
  bool quiet = false;                // -q: the ids only, one a line
  std::string format;                // "table" (default) or "json"
  std::vector<std::string> filters;  // KEY=VALUE (cli/job_listing.h)
  std::string since;                 // only jobs submitted since (cli/job_logs.h parse_since), ended ones too
};
int cmd_ps(const Context& ctx, const PsArgs& args);

// `yonder wait JOB...`: blocks until each job has ended (in the order
// given), printing each one's exit code as it does. Exit code: the last
// job's; kExitCouldNotRun when it ended without one (failed to start,
// lost), with the reason on stderr; kExitError when a job could not be
// followed to its end.
int cmd_wait(const Context& ctx, const std::vector<std::string>& jobs);

// `yonder inspect JOB`: everything this node knows of the job, as JSON,
// asked of its provider now (as last seen when the provider does not answer).
int cmd_inspect(const Context& ctx, const std::string& job);

// `yonder stats JOB...`: each running job's CPU, memory, processes, GPU
// utilisation and VRAM, asked of its provider once a second (a table
// redrawn in place on a terminal, docker stats's way) until Ctrl-C or
// every job has ended; `no_stream`: one table, from two samples a second
// apart. `format` "json": one object a job a sample, a line each.
int cmd_stats(const Context& ctx, const std::vector<std::string>& jobs, bool no_stream, const std::string& format);

// The exit code a job that ended stands for, as `run`, `wait` and `logs -f`
// exit with: its own, or kExitCouldNotRun (saying why on stderr) when it
// ended without one.
int exit_code_of_ended(const nlohmann::json& view);

}  // namespace yonder::cli
