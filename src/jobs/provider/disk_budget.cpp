#include "jobs/provider/disk_budget.h"

#include <algorithm>
#include <cstdio>

namespace yonder::jobs::provider {
namespace {

std::string size_text(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ULL << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(bytes >> 20));
  }
  return buf;
}

uint64_t minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

uint64_t disk_reserve(uint64_t total_bytes, uint64_t reserve_bytes, double percent) {
  double share = percent > 0 ? static_cast<double>(total_bytes) * percent / 100.0 : 0.0;
  return std::min(reserve_bytes, static_cast<uint64_t>(share));
}

DiskDecision decide_disk(uint64_t requested_bytes, const DiskSnapshot& s) {
  uint64_t for_jobs = minus(s.free_bytes + s.allocated_by_live + s.allocated_by_ended, s.reserve_bytes);
  if (requested_bytes > for_jobs) {
    return {Fit::kNever, "this job asks for " + size_text(requested_bytes) +
                                 " of workspace disk, but the provider's workspace volume has " +
                                 size_text(s.free_bytes) + " free, " +
                                 size_text(s.allocated_by_live + s.allocated_by_ended) +
                                 " held by running and ended jobs' workspaces and " + size_text(s.reserve_bytes) +
                                 " kept back for its own state (jobs.disk_reserve_mib): ask for at most " +
                                 size_text(for_jobs) + " with --disk"};
  }
  uint64_t free_now = minus(minus(s.free_bytes, s.reserve_bytes), s.promised_unallocated);
  if (requested_bytes > free_now) {
    return {Fit::kLater, "disk: this job asks for " + size_text(requested_bytes) + " of workspace and " +
                                 size_text(free_now) + " is free until running jobs end or ended workspaces are removed"};
  }
  return {Fit::kNow, ""};
}

std::vector<std::string> workspaces_to_remove(std::vector<EndedWorkspace> ended, int64_t now_s, int64_t retention_s,
                                              uint64_t cap_bytes) {
  std::stable_sort(ended.begin(), ended.end(),
                   [](const EndedWorkspace& a, const EndedWorkspace& b) { return a.ended_at < b.ended_at; });
  std::vector<std::string> out;
  uint64_t kept = 0;
  std::vector<const EndedWorkspace*> rest;
  for (const auto& w : ended) {
    if (now_s - w.ended_at >= retention_s) {
      out.push_back(w.job_id);
    } else {
      kept += w.bytes;
      rest.push_back(&w);
    }
  }
  if (cap_bytes == 0) return out;
  for (const EndedWorkspace* w : rest) {
    if (kept <= cap_bytes) break;
    if (!w->fetched) continue;
    out.push_back(w->job_id);
    kept -= w->bytes;
  }
  return out;
}

int64_t next_workspace_expiry(const std::vector<EndedWorkspace>& ended, int64_t retention_s) {
  int64_t next = 0;
  for (const auto& w : ended) {
    int64_t at = w.ended_at + retention_s;
    if (next == 0 || at < next) next = at;
  }
  return next;
}

}  // namespace yonder::jobs::provider
