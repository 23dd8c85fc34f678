#include "jobs/files/workspace_mounts.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "os/loop_mount.h"

namespace yonder::jobs::files {

Result<std::string> WorkspaceMounts::acquire(const JobId& job) {
  const std::string& job_id = job.value();
  std::string dir = jobs_dir_ + "/" + job_id + "/workspace";
  std::string image = jobs_dir_ + "/" + job_id + "/workspace.img";
  std::lock_guard lock(mutex_);
  Mount& m = mounts_[job_id];
  // A running job's workspace is the executor's mount, and the executor
  // unmounts it when the job ends, whoever else is reading: so while the
  // folder is not ours, ask again each time. Trusting an earlier answer
  // gave a later caller the bare folder under it, and a fetch of an ended
  // job "succeeded" with no files.
  if (m.users == 0 || !m.ours) {
    if (os::is_mount_point(dir)) {
      m.ours = false;
    } else if (::access(image.c_str(), F_OK) == 0) {
      if (auto st = os::mount_loop(image, dir); !st) {
        if (m.users == 0) mounts_.erase(job_id);
        return std::move(st).error().with_context("opening the job's workspace");
      }
      m.ours = true;
    } else {
      if (m.users == 0) mounts_.erase(job_id);
      return make_error(
          ErrorCode::kNotFound,
          "job " + job_id +
              " has no workspace left on this provider: an ended job's workspace is removed after "
              "jobs.workspace_retention_s, or sooner past jobs.workspaces_max_mib once its outputs were fetched");
    }
  }
  ++m.users;
  return dir;
}

void WorkspaceMounts::release(const JobId& job) {
  const std::string& job_id = job.value();
  std::lock_guard lock(mutex_);
  auto it = mounts_.find(job_id);
  if (it == mounts_.end() || --it->second.users > 0) return;
  // A run of the job that started meanwhile took our mount as its own.
  bool handed_over = it->second.ours && job_runs_ && job_runs_(job);
  if (it->second.ours && !handed_over) {
    if (auto st = os::unmount(jobs_dir_ + "/" + job_id + "/workspace"); !st) {
      spdlog::warn("cannot unmount the workspace of job {}: {}", job_id, st.error().to_string());
    }
  }
  mounts_.erase(it);
}

}  // namespace yonder::jobs::files
