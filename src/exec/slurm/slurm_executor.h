// The Slurm backend of exec::Executor: a provider in front of a
// lab's existing cluster. Yonder does not schedule the cluster; it hands each
// job to Slurm's queue with sbatch and follows it:
//
//   start    stage the workspace under slurm.workdir_root (a folder the
//            cluster's nodes see), write a batch script, sbatch --parsable
//            with --gpus/--time/--mem/--cpus-per-task/-p/-A; a refusal
//            carries Slurm's own reason
//   wait     scontrol show job (sacct -c once slurmctld has forgotten it),
//            polled: Slurm has no event stream for a job's end
//   logs     the job's output file (stdout and stderr together), read as it
//            grows
//   stop     scancel --full --signal, then scancel after the grace
//   recover  by the Slurm job id in the persisted handle; list_owned finds
//            jobs by their comment "yonder:<owner>:<job_id>"
//
// Jobs run on the cluster's nodes directly, as slurm.run_as (when the
// daemon submits as root) with an environment of only what the job asked
// for (--export=NONE). The image is not used (container execution on the
// cluster is a later setting) and the job's network is the cluster's.
//
// Threading: as the interface says; every call runs Slurm's commands and
// blocks. Safe from several threads at once.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/slurm/slurm_output.h"
#include "os/process.h"

namespace yonder::exec::slurm {

struct SlurmOptions {
  std::string bin_dir;        // folder of sbatch, squeue, ...; "" searches PATH
  std::string conf;           // SLURM_CONF for the commands; "" leaves Slurm's default
  std::string partition;      // -p; "" the cluster's default partition
  std::string account;        // -A; "" the submitting user's default account
  std::string workdir_root;   // <root>/<job_id>/{workspace/, output.log, job.sh}; must be seen by the nodes
  std::string owner;          // this node's id, in each job's comment
  std::string run_as = "nobody";  // user jobs run as when the daemon is root; "" the daemon's own user
  std::chrono::milliseconds poll{250};  // how often wait() and logs(follow) look again
};

class SlurmExecutor final : public Executor {
 public:
  explicit SlurmExecutor(SlurmOptions options);

  Fingerprint fingerprint() override;
  Status check(const TaskSpec& spec) override;
  Result<TaskHandle> start(const TaskSpec& spec) override;
  Result<TaskStatus> recover(const TaskHandle& handle) override;
  Result<ExitInfo> wait(const TaskHandle& handle, const CancelSlot& on_cancel) override;
  Status stop(const TaskHandle& handle, int signal, std::chrono::seconds grace) override;
  Status signal(const TaskHandle& handle, int signal) override;
  Status destroy(const TaskHandle& handle, bool remove_workspace) override;
  Result<TaskStatus> inspect(const TaskHandle& handle) override;
  Result<TaskStats> stats(const TaskHandle& handle) override;
  Result<std::unique_ptr<ExecSession>> exec(const TaskHandle& handle, const ExecSpec& spec) override;
  Status logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
              const CancelSlot& on_cancel) override;
  Result<std::vector<OwnedTask>> list_owned() override;
  Status remove_task(const std::string& task_id) override;
  bool owns_pid(const TaskHandle& handle, int pid) override;

  // GPUs per node from sinfo (for the inventory and `yonder gpu`).
  Result<std::vector<SlurmNodeGpus>> gpu_capacity();
  // The job's folder: <workdir_root>/<job_id>.
  std::string job_dir(const std::string& job_id) const { return options_.workdir_root + "/" + job_id; }

  // Pure: the argv of sbatch for `spec`, submitting `script`. For tests.
  std::vector<std::string> sbatch_argv(const TaskSpec& spec, const std::string& script) const;
  // Pure: the batch script that runs spec.command in `workspace`.
  static std::string batch_script(const TaskSpec& spec, const std::string& workspace);

 private:
  // Runs one Slurm command (bin_dir, SLURM_CONF applied).
  Result<os::ProcessOutput> run(const std::string& program, std::vector<std::string> args);
  Result<SlurmJob> query(const std::string& slurm_id);

  SlurmOptions options_;
  int run_uid_ = -1;  // -1: submit as ourselves
  int run_gid_ = -1;
};

}  // namespace yonder::exec::slurm
