// A job's workspace folder on the provider, for the features that read or
// write its files from outside the job (jobs/files/fetch_provider.h: files out;
// jobs/files/files_provider.h: files in). A running job's workspace is mounted by
// the executor already; an ended job's image is loop-mounted here for as
// long as someone uses it (nosuid,nodev), and unmounted after the last user.
//
// Threading: any thread (blocking: mount and umount); guarded inside.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "base/error.h"
#include "base/strong_id.h"

namespace yonder::jobs::files {

class WorkspaceMounts {
 public:
  // `job_runs` says whether the executor runs the job now (starting or
  // running). A job started again on this provider (its start retried, or a
  // requeue that lands here) finds our mount of its image and uses it; our
  // last release must then leave it mounted: the executor unmounts it when
  // that run ends.
  explicit WorkspaceMounts(std::string jobs_dir, std::function<bool(const JobId& job_id)> job_runs = {})
      : jobs_dir_(std::move(jobs_dir)), job_runs_(std::move(job_runs)) {}
  // The job's workspace folder, mounted if need be (counted); kNotFound when
  // the provider has removed it. Pair with release().
  Result<std::string> acquire(const JobId& job_id);
  void release(const JobId& job_id);

 private:
  struct Mount {
    int users = 0;
    bool ours = false;  // we mounted it (and unmount it after the last user)
  };
  std::string jobs_dir_;
  std::function<bool(const JobId&)> job_runs_;
  std::mutex mutex_;  // guards mounts_
  std::map<std::string, Mount> mounts_;
};

}  // namespace yonder::jobs::files
