// A job's workspace folder on the provider, for the features that read or
// write its files from outside the job (node/fetch_provider.h: files out;
// node/files_provider.h: files in). A running job's workspace is mounted by
// the executor already; an ended job's image is loop-mounted here for as
// long as someone uses it (nosuid,nodev), and unmounted after the last user.
//
// Threading: any thread (blocking: mount and umount); guarded inside.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "base/error.h"

namespace yonder::node {

class WorkspaceMounts {
 public:
  explicit WorkspaceMounts(std::string jobs_dir) : jobs_dir_(std::move(jobs_dir)) {}
  // The job's workspace folder, mounted if need be (counted); kNotFound when
  // the provider has removed it. Pair with release().
  Result<std::string> acquire(const std::string& job_id);
  void release(const std::string& job_id);

 private:
  struct Mount {
    int users = 0;
    bool ours = false;  // we mounted it (and unmount it after the last user)
  };
  std::string jobs_dir_;
  std::mutex mutex_;  // guards mounts_
  std::map<std::string, Mount> mounts_;
};

}  // namespace yonder::node
