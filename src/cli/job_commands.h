// Remote jobs from the command line: run, logs, stop, cp (docs/cli.md;
// ps, wait and inspect: cli/job_status_commands.h).
// Each talks to the local daemon, which talks to the provider over the link.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

// The options of `yonder run`; empty means "not given" (so a job file can
// supply it: cli/run_options.h merges the two).
struct RunArgs {
  std::string peer;
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> env;  // K=V; later entries win
  std::vector<std::string> env_files;  // docker's --env-file format; -e wins over them
  // --gpus: whole GPUs (1, 2), or below 1 a share of one GPU (0.5: half
  // its memory); --vram alone is a share of that much VRAM.
  std::optional<double> gpus;
  std::optional<std::string> vram, cpus, memory, disk, time;
  std::optional<std::string> shm;  // --shm-size: the job's /dev/shm, "2G"
  // --name: what this node calls the job, usable wherever its id is
  // (unique among this node's jobs that have not ended).
  std::string name;
  bool detach = false;
  bool raw = false;  // --raw: the job's control sequences reach the terminal unfiltered
  bool no_upload = false;  // do not upload the working directory
  std::string upload_dir;  // upload this folder instead of the working directory
  // Brought home when the job ends (relative to the workspace); empty: the
  // files that differ from the local folder (none with --no-upload).
  std::vector<std::string> out;
  // --no-outputs-limit: bring the outputs home even past outputs.max_files /
  // outputs.max_mib (without it `run` asks on a terminal, refuses otherwise).
  bool no_outputs_limit = false;
  std::string workdir;  // inside the job: relative to /workspace, or under it
  std::vector<std::string> ports;  // LOCAL:REMOTE forwards while attached
  bool tty = false;  // the job's main process gets a terminal
  // Slurm's --dependency: jobs (ids or unique prefixes, on the same
  // provider) this one waits for: to end (--after), to exit 0 (--after-ok).
  std::vector<std::string> after, after_ok;
  bool hold = false;  // --hold: queued held until `yonder release`
  std::string job_file;  // -f: a TOML job file with the same fields
  // --mesh: no --on; the daemon places the job on a paired provider
  // (cli/mesh_commands.h) that has the GPUs, --cuda and every --label.
  bool mesh = false;
  std::optional<std::string> cuda;  // least compute capability, "8.0"
  std::vector<std::string> labels;  // KEY=VALUE
  std::optional<std::string> group;  // only providers in this group (name or id prefix)
  // --mesh with --retries: a mesh job the daemon supervises (mesh/jobs/mesh_jobs.h):
  // requeued when its provider is lost, rerun up to N times when it fails.
  std::optional<int> retries;
  // --mesh --replicas K: K providers run it; a quorum of their output
  // digests (or of --validator's verdicts, run in each replica's folder) decides.
  std::optional<int> replicas;
  std::optional<std::string> validator;
  // --mesh --array 0-N[%LIMIT] / --array-file FILE: an array of tasks
  // (cli/array_commands.h); --retries then counts per task.
  std::optional<std::string> array;
  std::string array_file;
  std::optional<int> per_task_gpus;  // --gpus for each task
};

// Exit code: the job's own when it ran to an end; kExitCouldNotRun when it
// never ran (refused, upload failed, failed to start, stopped before start);
// 128 + the signal (130 for Ctrl-C, 143 for SIGTERM) when we stopped the job
// because of that signal; 0 after a detach.
int cmd_run(const Context& ctx, const RunArgs& args);
struct LogsArgs {
  bool follow = false;
  std::string since;        // cli/job_logs.h parse_since
  bool raw = false;         // the job's control sequences pass as they came (see LogFollower::set_raw)
  std::string tail;         // -n/--tail: a count of lines or "all"; empty: all
  bool timestamps = false;  // -t: each line after its RFC 3339 time
};
// Exit code: 0; with `follow`, the job's own once it ended (as `wait`).
int cmd_logs(const Context& ctx, const std::string& job, const LogsArgs& args);
int cmd_stop(const Context& ctx, const std::string& job);
// `yonder hold JOB...` / `yonder release JOB...`: a job still waiting in its
// provider's queue keeps its place without starting, or may start again.
int cmd_hold(const Context& ctx, const std::vector<std::string>& jobs, bool held);
// `yonder cp JOB:PATH [LOCAL]`: copies a file or folder out of a running or
// ended job's workspace into LOCAL (a folder, default the working directory).
// `yonder cp LOCAL JOB:PATH`: copies a local file or folder into the folder
// PATH of a running job's workspace (the scope needs `files`).
// `dry_run`: out of a job only; lists what would come home, writes nothing.
int cmd_cp(const Context& ctx, const std::string& from, const std::string& to, bool dry_run = false);

}  // namespace yonder::cli
