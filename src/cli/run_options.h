// The files and option texts `yonder run` reads before it submits a job:
// env files (docker's --env-file format), job files (`-f job.toml`, the
// run flags as TOML; docs/cli.md) and LOCAL:REMOTE port pairs; and how they
// merge with the flags given on the command line. Pure apart from reading
// the files; unit-tested in tests/cli/run_options_test.cpp.
//
// Both files are the user's own, but still bounded in size and parsed
// strictly: an unknown key or a bad line is an error naming file:line, so a
// typo never silently falls back to a default.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cli/job_commands.h"
#include "config/config.h"
#include "jobs/protocol/job_request.h"

namespace yonder::cli {

inline constexpr size_t kMaxEnvFileBytes = 256 * 1024;
inline constexpr size_t kMaxJobFileBytes = 256 * 1024;

// Docker's env-file format: one KEY=VALUE a line (the value is taken as is:
// no quotes removed, no variables expanded), lines starting with '#' and
// blank lines skipped, leading white space ignored, a bare KEY takes its
// value from `env` (our environment) and is left out when unset there.
// `origin` names the file in errors ("vars.env:3: ...").
Result<std::vector<std::pair<std::string, std::string>>> parse_env_file(std::string_view text,
                                                                        const std::string& origin,
                                                                        const config::EnvFn& env);
Result<std::vector<std::pair<std::string, std::string>>> read_env_file(const std::string& path,
                                                                       const config::EnvFn& env);

// A job file's fields as RunArgs (`env` as K=V from its [env] table,
// `env_files` and `upload_dir` made relative to `base_dir`, the file's folder).
Result<RunArgs> parse_job_file(std::string_view text, const std::string& origin, const std::string& base_dir);
Result<RunArgs> read_job_file(const std::string& path);

struct PortPair {
  int local = 0;  // 0: any free port
  int remote = 0;
};
// "LOCAL:REMOTE" (LOCAL 0 picks a free port) or "REMOTE" (the same port locally).
Result<PortPair> parse_port_pair(std::string_view text);

// What `yonder run` runs: the job file (if `given.job_file`) under the flags
// of `given`, which win: a value given on the command line replaces the
// file's (a list replaces the file's list). The environment is merged by
// name, later layers winning: the file's env_file, its [env], our
// --env-file, our -e (a bare `-e KEY` takes KEY's value from `env`, and is
// left out when KEY is unset there, as docker does). The env files are read here (their entries become
// K=V in `env`) and the ports checked.
Result<RunArgs> effective_run_args(const RunArgs& given, const config::EnvFn& env);

// The job `yonder run` asks for (image, command, -e, -w, -t, --gpus,
// --vram, --memory, --disk, --time, --cpus), from the effective RunArgs: the
// one JobRequest that travels to the provider's store. What is not given
// stays 0, the provider's default. kInvalidArgument names the flag.
Result<jobs::protocol::JobRequest> job_request_of(const RunArgs& args);

}  // namespace yonder::cli
