#include "jobs/provider/job_terms.h"

#include <algorithm>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "crypto/scope.h"

namespace yonder::jobs::provider {
namespace {

Error over(const std::string& what, const std::string& asked, const std::string& max, const char* setting) {
  return make_error(ErrorCode::kPermissionDenied, "this job asks for " + asked + " " + what + " but this provider allows at most " +
                                                      max + " (" + setting + ")");
}

constexpr int64_t kMiB = 1 << 20;

Error over_scope(const std::string& what, const std::string& asked, const std::string& allowed, const std::string& flag) {
  return make_error(ErrorCode::kPermissionDenied, "this job asks for " + asked + " " + what +
                                                      " but your scope on this provider allows at most " + allowed +
                                                      "; ask the provider to raise it (yonder scope PEER " + flag + ")");
}

}  // namespace

Status apply_scope(JobRequest& r, const Scope& s, const ProviderLimits& l) {
  if (r.egress && !s.egress) {
    return make_error(ErrorCode::kPermissionDenied, "this job asks for network egress but your scope on this provider "
                                                    "does not allow it; ask the provider (yonder scope PEER --egress)");
  }
  if (s.gpus > 0 && r.gpus > s.gpus) {
    return over_scope("GPU(s)", std::to_string(r.gpus), std::to_string(s.gpus), "--gpus N");
  }
  if (s.vram_bytes > 0 && (r.gpus > 0 || r.share_permille > 0)) {
    // Per whole GPU, or the most a fraction of one may come to.
    int64_t cap = static_cast<int64_t>(s.vram_bytes / kMiB);
    if (r.vram_mib == 0) r.vram_mib = cap;
    if (r.vram_mib > cap) return over_scope("of VRAM", format_size(r.vram_mib * kMiB), format_size(s.vram_bytes), "--vram SIZE");
  }
  if (s.vram_bytes > 0 && r.share_vram_mib > 0 && r.share_vram_mib > static_cast<int64_t>(s.vram_bytes / kMiB)) {
    return over_scope("of VRAM", format_size(r.share_vram_mib * kMiB), format_size(s.vram_bytes), "--vram SIZE");
  }
  if (s.max_time_s > 0) {
    int64_t cap = s.max_time_s;
    if (r.wall_time_s == 0) r.wall_time_s = std::min(cap, l.default_wall_time_s);
    if (r.wall_time_s > cap) return over_scope("of wall time", format_duration(r.wall_time_s), format_duration(cap), "--max-time T");
  }
  if (s.cpus_milli > 0) {
    double cap = s.cpus_milli / 1000.0;
    if (r.cpus == 0) r.cpus = std::min(cap, l.default_cpus);
    if (r.cpus > cap + 1e-9) return over_scope("CPUs", std::to_string(r.cpus), std::to_string(cap), "--cpus N");
  }
  if (s.memory_bytes > 0) {
    int64_t cap = static_cast<int64_t>(s.memory_bytes / kMiB);
    if (r.memory_mib == 0) r.memory_mib = std::min(cap, l.default_memory_mib);
    if (r.memory_mib > cap) return over_scope("of memory", format_size(r.memory_mib * kMiB), format_size(s.memory_bytes), "--memory SIZE");
  }
  if (s.disk_bytes > 0) {
    int64_t cap = static_cast<int64_t>(s.disk_bytes / kMiB);
    if (r.disk_mib == 0) r.disk_mib = std::min(cap, l.default_disk_mib);
    if (r.disk_mib > cap) return over_scope("of disk", format_size(r.disk_mib * kMiB), format_size(s.disk_bytes), "--disk SIZE");
  }
  return ok_status();
}

Result<ResolvedJob> resolve(const JobRequest& request, const ProviderLimits& limits) {
  ResolvedJob out;
  exec::TaskSpec& t = out.task;
  t.image = request.image;
  t.command = request.command;
  t.env = request.env;
  t.workdir = protocol::job_workdir(request.workdir);
  t.tty = request.tty;
  double cpus = request.cpus > 0 ? request.cpus : limits.default_cpus;
  if (cpus > limits.max_cpus) return over("CPUs", std::to_string(cpus), std::to_string(limits.max_cpus), "jobs.max_cpus");
  int64_t memory = request.memory_mib > 0 ? request.memory_mib : limits.default_memory_mib;
  if (memory > limits.max_memory_mib) {
    return over("MiB of memory", std::to_string(memory), std::to_string(limits.max_memory_mib), "jobs.max_memory_mib");
  }
  if (memory < 16) return make_error(ErrorCode::kInvalidArgument, "a job needs at least 16 MiB of memory");
  int64_t disk = request.disk_mib > 0 ? request.disk_mib : limits.default_disk_mib;
  if (disk > limits.max_disk_mib) {
    return over("MiB of workspace disk", std::to_string(disk), std::to_string(limits.max_disk_mib), "jobs.max_disk_mib");
  }
  if (disk < 8) return make_error(ErrorCode::kInvalidArgument, "a job's workspace must be at least 8 MiB");
  int64_t wall = request.wall_time_s > 0 ? request.wall_time_s : limits.default_wall_time_s;
  if (wall > limits.max_wall_time_s) {
    return over("seconds of wall time", std::to_string(wall), std::to_string(limits.max_wall_time_s), "jobs.max_wall_time_s");
  }
  if (request.egress && !limits.allow_egress) {
    return make_error(ErrorCode::kPermissionDenied,
                      "this job asks for network egress but this provider runs jobs without a network "
                      "(executor.allow_egress is false)");
  }
  if (request.isolation == exec::Isolation::kGvisor && !limits.allow_gvisor) {
    return make_error(ErrorCode::kPermissionDenied, "this provider does not offer gVisor isolation");
  }
  t.limits.nano_cpus = static_cast<int64_t>(cpus * 1e9);
  t.limits.memory_bytes = memory << 20;
  // /tmp is RAM: a quarter of the job's memory at most, so it can never
  // take the whole limit.
  t.limits.tmp_bytes = std::min<int64_t>(256LL << 20, t.limits.memory_bytes / 4);
  // /dev/shm is RAM too, charged to the job's memory limit as it fills:
  // at most half of it, so what the workers put there leaves the rest to
  // the processes. By default that half (jobs.shm_mib = 0): a DataLoader's
  // workers hand whole batches through it, and docker's 64 MiB fails them
  // (bench/shm_dataloader.sh).
  int64_t shm_cap = memory / 2;
  if (request.shm_mib > shm_cap) {
    return make_error(ErrorCode::kInvalidArgument,
                      "this job asks for " + std::to_string(request.shm_mib) +
                          " MiB of /dev/shm but a job's /dev/shm is at most half its memory (" +
                          std::to_string(shm_cap) + " MiB of " + std::to_string(memory) +
                          "): ask for more --memory, or a smaller --shm-size");
  }
  int64_t shm = request.shm_mib > 0 ? request.shm_mib : limits.shm_mib > 0 ? std::min(limits.shm_mib, shm_cap) : shm_cap;
  t.limits.shm_bytes = std::max<int64_t>(shm, 1) << 20;
  t.limits.disk_bytes = disk << 20;
  t.limits.pids = limits.pids;
  t.limits.log_file_bytes = limits.log_file_bytes;
  t.limits.wall_time_s = wall;
  t.network_egress = request.egress;
  t.isolation = request.isolation;
  out.wall_time = std::chrono::seconds(wall);
  out.share = share_request(request);
  out.gpus = request.gpus;
  out.vram_bytes = out.share ? 0 : static_cast<uint64_t>(request.vram_mib) << 20;
  return out;
}

std::optional<ShareRequest> share_request(const JobRequest& request) {
  if (!request.share()) return std::nullopt;
  ShareRequest share;
  share.vram_bytes = static_cast<uint64_t>(request.share_vram_mib) << 20;
  share.permille = static_cast<uint32_t>(request.share_permille);
  if (share.vram_bytes == 0) share.max_bytes = static_cast<uint64_t>(request.vram_mib) << 20;
  return share;
}

JobTerms job_terms(const JobRequest& request, const ResolvedJob& resolved, bool simulate_gpus,
                   std::string workspace_seed) {
  JobTerms t;
  t.request = request;
  t.wall_time_s = resolved.wall_time.count();
  t.vram_bytes = resolved.vram_bytes;
  t.gpus = resolved.gpus;
  t.disk_bytes = static_cast<uint64_t>(resolved.task.limits.disk_bytes);
  t.simulate_gpus = simulate_gpus && (resolved.gpus > 0 || resolved.share);
  t.workspace_seed = std::move(workspace_seed);
  return t;
}

nlohmann::json terms_to_json(const JobTerms& t) {
  nlohmann::json j = {{"request", t.request.to_json()}, {"wall_time_s", t.wall_time_s}, {"vram_bytes", t.vram_bytes},
                      {"gpus", t.gpus},  {"disk_bytes", t.disk_bytes},   {"simulate_gpus", t.simulate_gpus}};
  if (!t.workspace_seed.empty()) j["workspace_seed"] = t.workspace_seed;
  if (t.max_running > 0) j["max_running"] = t.max_running;
  return j;
}

Result<JobTerms> terms_from_json(const nlohmann::json& j) {
  auto damaged = [](const std::string& what) { return make_error(ErrorCode::kDataLoss, "job terms: " + what); };
  if (!j.is_object()) return damaged("not an object");
  auto request = j.find("request");
  if (request == j.end()) return damaged("no request");
  auto parsed = protocol::parse_job_request(*request);
  if (!parsed) return damaged(parsed.error().message());
  JobTerms t;
  t.request = std::move(*parsed);
  // Rows written by older versions may lack a field: 0 / false / "" then,
  // which the job manager reads as its current default.
  auto number = [&](const char* key, auto& out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return ok_status();
    if (!it->is_number_integer()) return damaged(std::string("'") + key + "' is not an integer");
    using T = std::remove_reference_t<decltype(out)>;
    if (it->is_number_unsigned()) {
      out = static_cast<T>(it->template get<uint64_t>());
    } else {
      int64_t v = it->template get<int64_t>();
      if (v < 0) return damaged(std::string("'") + key + "' is negative");
      out = static_cast<T>(v);
    }
    return ok_status();
  };
  YONDER_TRY(number("wall_time_s", t.wall_time_s));
  YONDER_TRY(number("vram_bytes", t.vram_bytes));
  YONDER_TRY(number("gpus", t.gpus));
  YONDER_TRY(number("disk_bytes", t.disk_bytes));
  YONDER_TRY(number("max_running", t.max_running));
  if (auto it = j.find("simulate_gpus"); it != j.end()) {
    if (!it->is_boolean()) return damaged("'simulate_gpus' is not true or false");
    t.simulate_gpus = it->get<bool>();
  }
  if (auto it = j.find("workspace_seed"); it != j.end()) {
    if (!it->is_string()) return damaged("'workspace_seed' is not a string");
    t.workspace_seed = it->get<std::string>();
  }
  return t;
}

}  // namespace yonder::jobs::provider
