// The decoders of what Slurm's commands print, in one place (STYLE rule 5):
// sbatch --parsable, scontrol show job -o, squeue and sacct with a '|'
// separated format we choose, and sinfo's node GRES columns. Slurm's output
// is untrusted input like any other: every parser refuses more than
// kMaxSlurmOutputBytes, bounds each field, never throws, and is fuzzed
// (fuzz/slurm_output_fuzz.cpp). The formats were recorded from Slurm 22.05
// (Debian 12); tests/exec/slurm/slurm_output_test.cpp holds the recordings.
//
// Pure: no I/O. The executor (slurm_executor.h) runs the commands.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "exec/executor.h"

namespace yonder::exec::slurm {

constexpr size_t kMaxSlurmOutputBytes = 1 << 20;
constexpr size_t kMaxSlurmFieldBytes = 4096;

// A Slurm job id as Slurm prints it: decimal digits only (array and het
// job suffixes are not ours: we never submit those).
bool is_slurm_job_id(std::string_view text);

// sbatch --parsable prints "ID" or "ID;CLUSTER" (warnings may come first,
// stderr is merged). The job id.
Result<std::string> parse_sbatch_reply(std::string_view output);

// sbatch's refusal in Slurm's words: the "sbatch: error: " lines, joined
// with "; " (the whole output, trimmed, if it has none).
std::string sbatch_error_text(std::string_view output);

// One job as Slurm describes it; fields absent from a source stay empty.
struct SlurmJob {
  std::string job_id;
  std::string name;
  std::string state;     // base state, upper case: "PENDING", "CANCELLED" ("CANCELLED by 0" and "CANCELLED+" shortened)
  std::string reason;    // "Resources", "None", "NonZeroExitCode", ...
  std::string comment;
  std::string std_out;   // StdOut path (scontrol only)
  bool has_exit = false;
  int exit_code = 0;     // of the batch script
  int exit_signal = 0;   // the signal that ended it, 0 if none
};

// scontrol show job -o ID: one line of Key=Value pairs separated by
// spaces (a value may itself hold spaces: it runs to the next " Key=").
// kNotFound when Slurm no longer knows the job ("Invalid job id").
Result<SlurmJob> parse_scontrol_job(std::string_view output);

// squeue -h -t all -o '%i|%T|%j|%k|%r': one job per line.
Result<std::vector<SlurmJob>> parse_squeue(std::string_view output);

// sacct [-c] -n -P -o JobID,State,ExitCode -j ID: the job's own line
// (steps such as "ID.batch" are skipped). nullopt when it is not listed.
Result<std::optional<SlurmJob>> parse_sacct(std::string_view output, std::string_view job_id);

// GPUs of one node: sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|'.
struct SlurmNodeGpus {
  std::string node;
  std::string state;     // "idle", "mixed", "allocated", "drained", "down*", ...
  std::string type;      // GPU type from "gpu:a100:4", "" when untyped
  int total = 0;
  int used = 0;
  bool available() const;  // the node can take jobs (not down, drained, failing)
};
Result<std::vector<SlurmNodeGpus>> parse_sinfo_gpus(std::string_view output);

// What the executor reports for a job in this state: running while Slurm
// still has it queued or running (kCreated while PENDING), exited with the
// exit code (128+signal when a signal ended it) and a cause for endings the
// job did not choose (time limit, node failure, cancellation, OOM).
TaskStatus task_status(const SlurmJob& job);
bool is_terminal_state(std::string_view state);

}  // namespace yonder::exec::slurm
