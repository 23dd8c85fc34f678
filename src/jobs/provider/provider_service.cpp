#include "jobs/provider/provider_service.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <thread>

#include "exec/docker/docker_executor.h"
#include "exec/slurm/slurm_inventory.h"
#include "jobs/provider/provider_jobs.h"
#include "os/process.h"
#include "store/database.h"

namespace yonder::jobs::provider {

ProviderService::~ProviderService() { shutdown(); }

Result<std::unique_ptr<ProviderService>> ProviderService::create(const config::Config& cfg, const config::Paths& paths,
                                                                 gpu::GpuInventory& inventory, const std::string& owner) {
  std::unique_ptr<ProviderService> service(new ProviderService());
  std::string backend = cfg.get("executor.backend");
  gpu::GpuInventory* job_inventory = &inventory;
  if (backend == "slurm") {
    // The cluster schedules; its GPUs (sinfo), not this host's, are leased.
    exec::slurm::SlurmOptions slurm;
    slurm.bin_dir = cfg.get("slurm.bin_dir");
    slurm.conf = cfg.get("slurm.conf");
    slurm.partition = cfg.get("slurm.partition");
    slurm.account = cfg.get("slurm.account");
    slurm.workdir_root = cfg.get("slurm.workdir_root");
    if (slurm.workdir_root.empty()) slurm.workdir_root = paths.home + "/slurm";
    slurm.run_as = cfg.get("slurm.run_as");
    slurm.owner = owner;
    auto executor = std::make_unique<exec::slurm::SlurmExecutor>(std::move(slurm));
    service->cluster_inventory_ = std::make_unique<exec::slurm::SlurmGpuInventory>(*executor);
    service->isolation_notice_ =
        "jobs run on its Slurm cluster's nodes directly, without a container: the image is not used, the job sees "
        "the node's file system as the user " + (cfg.get("slurm.run_as").empty() ? std::string("yonderd runs as")
                                                                                     : cfg.get("slurm.run_as")) +
        " does, and shares the cluster's network";
    job_inventory = service->cluster_inventory_.get();
    service->executor_ = std::move(executor);
  } else if (backend != "docker") {
    service->disabled_ = "this node runs no provider jobs (executor.backend is " + backend + ")";
    return service;
  } else {
    auto images = exec::ImagePolicy::parse(cfg.get("executor.image_allowlist"), cfg.get("executor.pull_policy"));
    if (!images) return std::move(images).error();
    for (const auto& rule : images->rules()) service->allowed_images_.push_back(rule.text);
    exec::docker::DockerOptions docker;
    docker.socket = cfg.get("docker.socket");
    docker.owner = owner;
    docker.jobs_dir = paths.home + "/jobs";
    docker.images = std::move(*images);
    docker.gvisor_runtime = cfg.get("executor.gvisor_runtime");
    docker.egress_network = cfg.get("executor.egress_network");
    docker.vram_guard = cfg.get("gpu.vram_guard");
    if (docker.vram_guard.empty()) docker.vram_guard = os::private_lib_path("libyonder-vram-guard.so");
    service->executor_ = std::make_unique<exec::docker::DockerExecutor>(std::move(docker));
  }

  jobs::provider::ProviderOptions options;
  auto& l = options.limits;
  l.default_cpus = static_cast<double>(cfg.get_int("jobs.default_cpus"));
  int64_t max_cpus = cfg.get_int("jobs.max_cpus");
  l.max_cpus = max_cpus > 0 ? static_cast<double>(max_cpus) : static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  l.default_cpus = std::min(l.default_cpus, l.max_cpus);
  l.default_memory_mib = cfg.get_int("jobs.default_memory_mib");
  l.max_memory_mib = cfg.get_int("jobs.max_memory_mib");
  l.default_disk_mib = cfg.get_int("jobs.default_disk_mib");
  l.max_disk_mib = cfg.get_int("jobs.max_disk_mib");
  l.default_wall_time_s = cfg.get_int("jobs.default_wall_time_s");
  l.max_wall_time_s = cfg.get_int("jobs.max_wall_time_s");
  l.pids = cfg.get_int("jobs.pids_limit");
  l.shm_mib = cfg.get_int("jobs.shm_mib");
  l.allow_egress = cfg.get_bool("executor.allow_egress");
  l.allow_gvisor = cfg.get_bool("executor.allow_gvisor");
  options.max_concurrent = static_cast<int>(cfg.get_int("jobs.max_concurrent"));
  options.max_per_peer = static_cast<int>(cfg.get_int("jobs.max_per_peer"));
  options.max_queued = static_cast<int>(cfg.get_int("jobs.max_queued"));
  options.max_queued_per_peer = static_cast<int>(cfg.get_int("jobs.max_queued_per_peer"));
  options.log_max_bytes = static_cast<uint64_t>(std::max<int64_t>(64 * 1024, cfg.get_int("jobs.log_max_bytes")));
  options.jobs_dir = paths.home + "/jobs";
  // Slurm's workspaces live on the cluster's shared folder, not in images here.
  options.account_disk = backend == "docker";
  options.disk_reserve_bytes = static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("jobs.disk_reserve_mib"))) << 20;
  options.disk_reserve_percent = static_cast<double>(std::max<int64_t>(0, cfg.get_int("jobs.disk_reserve_percent")));
  options.workspace_retention = std::chrono::seconds(std::max<int64_t>(0, cfg.get_int("jobs.workspace_retention_s")));
  options.logs_max_bytes = static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("jobs.logs_max_mib"))) << 20;
  options.workspaces_max_bytes = static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("jobs.workspaces_max_mib"))) << 20;
  options.stop_grace = std::chrono::seconds(std::max<int64_t>(0, cfg.get_int("jobs.stop_grace_s")));
  options.vram_interval = std::chrono::milliseconds(std::max<int64_t>(100, cfg.get_int("gpu.vram_check_interval_ms")));
  // Tests only: a fake inventory, or NVML's test double (tests/gpu/nvml_stub.c).
  options.simulate_gpus = backend == "docker" && cfg.get("gpu.inventory") != "nvml" &&
                          cfg.get_bool("gpu.fake_without_runtime");
  auto shares = parse_share_setting(cfg.get("gpu.share"));
  if (!shares) return std::move(shares).error();
  // A cluster schedules its own GPUs, whole (sbatch --gpus).
  if (backend == "docker") options.gpu_shares = std::move(*shares);
  if (options.max_concurrent < 1 || options.max_per_peer < 1) {
    return make_error(ErrorCode::kInvalidArgument, "jobs.max_concurrent and jobs.max_per_peer must be at least 1");
  }
  auto db = store::Database::open(paths.database());
  if (!db) return std::move(db).error().with_context("provider jobs");
  service->jobs_ =
      std::make_unique<jobs::provider::ProviderJobs>(std::make_unique<jobs::provider::JobStore>(std::move(*db)),
                                                     *service->executor_, *job_inventory, std::move(options));
  return service;
}

void ProviderService::start() {
  if (!jobs_) return;
  std::lock_guard lock(mutex_);
  if (started_) return;
  auto st = jobs_->start();
  started_ = st.ok();
  std::string error = st ? "" : st.error().to_string();
  if (!st && error != start_error_) spdlog::warn("provider jobs are not available: {}", error);
  if (st) spdlog::info("provider jobs ready");
  start_error_ = error;
}

Result<jobs::provider::ProviderJobs*> ProviderService::ready() {
  if (!jobs_) return make_error(ErrorCode::kFailedPrecondition, disabled_);
  start();  // retries after an earlier failure (Docker down at boot)
  std::lock_guard lock(mutex_);
  if (!started_) return make_error(ErrorCode::kUnavailable, "provider jobs are not available: " + start_error_);
  return jobs_.get();
}

void ProviderService::set_queue_order(
    std::function<std::vector<std::string>(const std::vector<jobs::provider::ProviderJobs::QueuedJob>&)> order) {
  if (jobs_) jobs_->set_queue_order(std::move(order));
}

void ProviderService::set_limits(int max_per_peer, int max_queued, int max_queued_per_peer) {
  if (jobs_) jobs_->set_limits(max_per_peer, max_queued, max_queued_per_peer);
}

void ProviderService::shutdown() {
  if (jobs_) jobs_->shutdown();
}

}  // namespace yonder::jobs::provider
