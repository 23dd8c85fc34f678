// ProviderJobs: the workspace disk it promises to jobs and the ended
// workspaces it takes back. The decisions are disk_budget.h's; this file
// reads the volume and the images for them and does what they say.
#include <algorithm>
#include <filesystem>
#include <limits>

#include <sys/stat.h>

#include "jobs/provider/disk_budget.h"
#include "jobs/provider/live_job.h"
#include "jobs/provider/provider_jobs.h"
#include "os/loop_mount.h"

namespace yonder::jobs::provider {

std::string ProviderJobs::workspace_image_of(const Live& job) const {
  if (job.rec.handle && !job.rec.handle->workspace_image.empty()) return job.rec.handle->workspace_image;
  return options_.jobs_dir + "/" + job.rec.job_id + "/workspace.img";
}

uint64_t ProviderJobs::disk_promise(const JobRecord& r) const {
  return r.terms.disk_bytes > 0 ? r.terms.disk_bytes : static_cast<uint64_t>(options_.limits.default_disk_mib) << 20;
}

std::optional<DiskSnapshot> ProviderJobs::disk_snapshot_locked() {
  auto space = os::volume_space(options_.jobs_dir);
  if (!space) return std::nullopt;
  DiskSnapshot s;
  s.free_bytes = space->free_bytes;
  s.reserve_bytes = disk_reserve(space->total_bytes, options_.disk_reserve_bytes, options_.disk_reserve_percent);
  for (const auto& [_, job] : jobs_) {
    if (is_terminal(job->rec.state)) {
      if (job->rec.handle && !job->rec.handle->workspace_image.empty() &&
          !job->rec.result.contains("workspace_removed_at")) {
        s.allocated_by_ended += os::allocated_bytes(job->rec.handle->workspace_image);
      }
      continue;
    }
    if (job->rec.state != JobState::kStarting && job->rec.state != JobState::kRunning) continue;
    uint64_t promised = disk_promise(job->rec);
    uint64_t have = os::allocated_bytes(workspace_image_of(*job));
    s.allocated_by_live += have;
    if (promised > have) s.promised_unallocated += promised - have;
  }
  return s;
}

void ProviderJobs::outputs_fetched(const JobId& job_id) {
  std::lock_guard lock(mutex_);
  auto job = find(job_id);
  // A running job's files are not its outputs yet.
  if (!job || !is_terminal((*job)->rec.state) || (*job)->rec.result.contains("outputs_fetched_at")) return;
  (*job)->rec.result["outputs_fetched_at"] = now_s();
  (void)save_locked(**job);  // lost on a full disk: the workspace then waits for its retention
  sweep_due_ = true;
  watch_cv_.notify_all();
}

MonoTime ProviderJobs::next_sweep_locked(MonoTime now) const {
  std::vector<EndedWorkspace> ended;
  for (const auto& [_, job] : jobs_) {
    const JobRecord& r = job->rec;
    if (!is_terminal(r.state) || !r.handle || r.handle->workspace_image.empty() ||
        r.result.contains("workspace_removed_at")) {
      continue;
    }
    ended.push_back({r.job_id, r.result.value("finished_at", r.updated_at), 0, false});
  }
  int64_t at = next_workspace_expiry(ended, options_.workspace_retention.count());
  if (at == 0) return MonoTime::max();
  return now + std::chrono::seconds(at - now_s());  // at or before `now` once it is due
}

int ProviderJobs::sweep_workspaces() {
  std::vector<std::pair<LivePtr, exec::TaskHandle>> doomed;
  {
    std::lock_guard lock(mutex_);
    if (!options_.account_disk) return 0;
    std::vector<EndedWorkspace> ended;
    for (const auto& [id, job] : jobs_) {
      const JobRecord& r = job->rec;
      if (!is_terminal(r.state) || !r.handle || r.handle->workspace_image.empty() ||
          r.result.contains("workspace_removed_at") || (job->runner.joinable() && !job->runner_done.load())) {
        continue;
      }
      ended.push_back({id, r.result.value("finished_at", r.updated_at), os::allocated_bytes(r.handle->workspace_image),
                       r.result.contains("outputs_fetched_at")});
    }
    for (const auto& id : workspaces_to_remove(ended, now_s(), options_.workspace_retention.count(),
                                               options_.workspaces_max_bytes)) {
      LivePtr job = jobs_.at(id);
      doomed.emplace_back(job, *job->rec.handle);
    }
  }
  int removed = 0;
  for (auto& [job, handle] : doomed) {
    // The container is long gone; this unmounts a fetch's mount of the
    // image lazily (the reader reads on) and deletes the image. The job's
    // folder stays: its log is there.
    if (auto st = executor_.destroy(handle, true); !st) continue;  // tried again at the next sweep
    std::lock_guard lock(mutex_);
    job->rec.result["workspace_removed_at"] = now_s();
    (void)save_locked(*job);
    ++removed;
  }
  return removed;
}

int ProviderJobs::sweep_logs() {
  if (options_.logs_max_bytes == 0) return 0;
  std::vector<std::string> doomed;
  {
    std::lock_guard lock(mutex_);
    // The logs cap is the workspaces' cap with no retention and every log
    // counted as fetched: oldest ended first, only while over the cap.
    std::vector<EndedWorkspace> ended;
    for (const auto& [id, job] : jobs_) {
      const JobRecord& r = job->rec;
      if (!is_terminal(r.state) || r.result.contains("log_removed_at") ||
          (job->runner.joinable() && !job->runner_done.load())) {
        continue;
      }
      // Ordered by the log's last write, in nanoseconds: jobs that end in
      // the same second still go oldest first.
      struct stat st {};
      if (::stat((options_.jobs_dir + "/" + id + "/output.log").c_str(), &st) != 0) continue;
      int64_t written_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
      ended.push_back({id, written_ns, static_cast<uint64_t>(st.st_size), true});
    }
    doomed = workspaces_to_remove(std::move(ended), now_s(), std::numeric_limits<int64_t>::max(),
                                  options_.logs_max_bytes);
    for (const auto& id : doomed) {
      Live& job = *jobs_.at(id);
      // Readers hold their own reference to an open log and finish reading.
      job.log.reset();
      open_finished_logs_.erase(std::remove(open_finished_logs_.begin(), open_finished_logs_.end(), id),
                                open_finished_logs_.end());
      job.closed_log_bytes = 0;
      job.rec.result["log_removed_at"] = now_s();
      (void)save_locked(job);
    }
  }
  // Marked first, so no reader opens the file again meanwhile. An unlink
  // that fails (the file system gone read-only) leaves the file behind;
  // nothing else would write it.
  for (const auto& id : doomed) {
    std::error_code ec;
    std::filesystem::remove(options_.jobs_dir + "/" + id + "/output.log", ec);
  }
  return static_cast<int>(doomed.size());
}

}  // namespace yonder::jobs::provider
