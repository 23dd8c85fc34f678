// Disk the provider promises to jobs, and the ended workspaces it takes
// back. Pure: the caller reads the volume (statvfs), the images' allocated
// sizes and the clock, and does what the answer says.
//
// The promise. A job's `--disk` is a file system image the executor
// allocates in full when the job starts (fallocate), so once a job runs,
// nothing else on the host can take its space. Before that, the queue
// decides with the numbers below:
//
//   for jobs   = free + allocated by live and ended jobs' images - reserve
//   free now   = free - reserve - (promised to live jobs but not yet allocated)
//
// A job asking for more than `for jobs` can never start on this volume and
// is refused at submit, naming the numbers. One asking for more than `free
// now` waits in the queue ("waiting for disk") like a job waiting for a
// GPU, and starts when ended workspaces are taken back or running jobs end.
// Queued jobs are not counted against each other: they hold nothing yet,
// and the queue's own bound (jobs.max_queued) limits them.
//
// The reserve keeps the state folder (SQLite, the audit log, job logs)
// writable when jobs fill their workspaces: the smaller of
// jobs.disk_reserve_mib and jobs.disk_reserve_percent of the volume.
//
// Taking workspaces back. An ended job's image stays for its outputs to be
// fetched (and for `cp` out of it), then goes when the first of these holds:
//   - it ended more than the retention ago (jobs.workspace_retention_s);
//   - ended images together exceed the cap (jobs.workspaces_max_mib): the
//     oldest whose outputs were fetched go first, until the rest fit. An
//     image nobody fetched yet stays until its retention passes, so a cap
//     never takes outputs from under a consumer who has not come back yet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jobs/provider/gpu_leases.h"

namespace yonder::jobs::provider {

// The smaller of `reserve_bytes` and `percent` of `total_bytes`.
uint64_t disk_reserve(uint64_t total_bytes, uint64_t reserve_bytes, double percent);

struct DiskSnapshot {
  uint64_t free_bytes = 0;              // the workspace volume's free space, for an unprivileged writer
  uint64_t reserve_bytes = 0;           // disk_reserve()
  uint64_t allocated_by_live = 0;       // bytes the starting/running jobs' images occupy now
  uint64_t promised_unallocated = 0;    // their promises not yet backed by an allocated image
  uint64_t allocated_by_ended = 0;      // ended jobs' images, which their retention gives back
};

struct DiskDecision {
  Fit fit = Fit::kNow;  // as for GPUs: now, later (wait in the queue), never (refuse)
  std::string reason;  // for kLater and kNever: the numbers, and what to do
};

DiskDecision decide_disk(uint64_t requested_bytes, const DiskSnapshot& s);

struct EndedWorkspace {
  std::string job_id;
  int64_t ended_at = 0;     // Unix seconds
  uint64_t bytes = 0;       // allocated size of its image
  bool fetched = false;     // its outputs went home at least once
};

// The ended workspaces to remove now, oldest first.
std::vector<std::string> workspaces_to_remove(std::vector<EndedWorkspace> ended, int64_t now_s, int64_t retention_s,
                                              uint64_t cap_bytes);

// The next time (Unix seconds) a workspace in `ended` passes its retention,
// or 0 when none is left to wait for.
int64_t next_workspace_expiry(const std::vector<EndedWorkspace>& ended, int64_t retention_s);

}  // namespace yonder::jobs::provider
