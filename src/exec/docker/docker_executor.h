// The Docker backend of exec::Executor: hardened containers
// (container_spec.h) on the Docker Engine API (docker_api.h), each with a
// loop-mounted ext4 workspace (os/loop_mount.h), images checked against the
// provider's ImagePolicy, GPUs passed by UUID through DeviceRequests, and
// every container labelled with the owner (this node) and its job id so a
// restarted daemon can find what it started.
//
// Podman's compatible service (4.3) answers the same calls with three
// differences handled here: it ignores HostConfig.Runtime (gVisor jobs are
// refused, container_spec.h), it never sets State.OOMKilled (the container's
// memory cgroup is watched from before the job starts, os/cgroup_oom.h), and
// it mounts unbounded tmpfs at /run and /var/tmp (bounded in the spec).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "exec/docker/docker_api.h"
#include "exec/executor.h"
#include "exec/image_policy.h"
#include "os/cgroup_oom.h"

namespace yonder::exec::docker {

struct DockerOptions {
  std::string socket = "/var/run/docker.sock";
  std::string owner;             // owner label value; the node id
  std::string jobs_dir;          // <jobs_dir>/<job_id>/{workspace.img,workspace}
  ImagePolicy images;
  std::string gvisor_runtime = "runsc";
  std::string egress_network = "yonder-egress";
  bool workspaces = true;        // false: no workspace mount (bench of the bare engine path)
  // The VRAM guard library preloaded into shares of a GPU
  // (libyonder-vram-guard.so, gpu.vram_guard); "" or missing: shares are
  // refused, saying so.
  std::string vram_guard;
};

class DockerExecutor final : public Executor {
 public:
  explicit DockerExecutor(DockerOptions options);

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

  // The container name used for a job ("yonder-<job_id>").
  static std::string container_name(const std::string& job_id) { return "yonder-" + job_id; }

 private:
  // Fingerprint, cached for a few seconds (it costs two API calls).
  Fingerprint cached_fingerprint();
  Result<std::string> ensure_image(const std::string& image);  // the image's id
  std::string vram_dir(const std::string& job_id) const;        // a share's ledger folder
  // Creates the egress network on first use: a bridge whose containers reach
  // the outside through NAT but not each other (enable_icc=false).
  Status ensure_egress_network();
  Result<ExitInfo> wait_for(const std::string& id, std::chrono::milliseconds timeout, const CancelSlot& on_cancel);
  // Podman: the container exists but its process has not run the job yet
  // (libpod's init); arms the OOM watch on its cgroup, then the caller starts it.
  Status init_and_watch(const std::string& id);
  // Podman: arms the watch on a running container found after a restart.
  void watch_running(const std::string& id, int pid);
  // Podman: whether the watch of container `id` saw an OOM kill; nullopt
  // when it has none (not Podman, or the kernel refused the watch).
  std::optional<bool> watched_oom(const std::string& id);

  struct OomWatchSlot {
    std::unique_ptr<os::OomWatch> watch;  // null when it could not be armed
    std::string unavailable;              // why, then
  };
  static OomWatchSlot arm_watch(int pid);

  DockerOptions options_;
  DockerApi api_;
  std::mutex mutex_;  // guards the cache and the watches below
  std::optional<Fingerprint> fingerprint_;
  std::chrono::steady_clock::time_point fingerprint_at_;
  std::map<std::string, OomWatchSlot> oom_watches_;  // by container id; Podman only
};

}  // namespace yonder::exec::docker
