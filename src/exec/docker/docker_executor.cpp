#include "exec/docker/docker_executor.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "exec/docker/container_spec.h"
#include "exec/docker/docker_json.h"
#include "exec/executor_metrics.h"
#include "exec/docker/stream_cancel.h"
#include "gpu/vram_guard/ledger.h"
#include "os/files.h"
#include "os/loop_mount.h"
#include "os/proc_files.h"
#include "os/tree_copy.h"

namespace yonder::exec::docker {
namespace {

constexpr auto kFingerprintTtl = std::chrono::seconds(5);
constexpr int kJobUid = 65534;

std::string cpath(const std::string& id) { return "/containers/" + id; }

bool is_hex_id(const std::string& s) {
  return !s.empty() && s.size() <= 128 &&
         s.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.-") == std::string::npos;
}

}  // namespace

DockerExecutor::DockerExecutor(DockerOptions options) : options_(std::move(options)), api_(options_.socket) {}

Fingerprint DockerExecutor::fingerprint() {
  Fingerprint fp;
  fp.backend = "docker";
  auto version = api_.call("GET", "/version", "report its version", {}, std::chrono::seconds(10));
  if (!version) {
    fp.detail = version.error().to_string();
    return fp;
  }
  auto v = parse_version(version->body);
  auto info_reply = api_.call("GET", "/info", "report its configuration", {}, std::chrono::seconds(10));
  if (!v || !info_reply) {
    fp.detail = !v ? v.error().to_string() : info_reply.error().to_string();
    return fp;
  }
  auto info = parse_info(info_reply->body);
  if (!info) {
    fp.detail = info.error().to_string();
    return fp;
  }
  fp.healthy = true;
  fp.engine = v->podman ? "podman" : "docker";
  fp.version = v->version;
  fp.runtimes = info->runtimes;
  auto gpu = gpu_support(*v, *info, !os::find_in_path("nvidia-container-runtime-hook").empty(), options_.socket);
  fp.gpu_capable = gpu.capable;
  fp.gpu_detail = gpu.detail;
  return fp;
}

Fingerprint DockerExecutor::cached_fingerprint() {
  {
    std::lock_guard lock(mutex_);
    if (fingerprint_ && std::chrono::steady_clock::now() - fingerprint_at_ < kFingerprintTtl) return *fingerprint_;
  }
  Fingerprint fp = fingerprint();
  std::lock_guard lock(mutex_);
  if (fp.healthy) {
    fingerprint_ = fp;
    fingerprint_at_ = std::chrono::steady_clock::now();
  }
  return fp;
}

Status DockerExecutor::check(const TaskSpec& spec) {
  if (spec.job_id.empty() || !is_hex_id(spec.job_id)) {
    return make_error(ErrorCode::kInvalidArgument, "job id '" + spec.job_id.substr(0, 64) + "' is not usable as a name");
  }
  auto ref = parse_image_ref(spec.image);
  if (!ref) return std::move(ref).error();
  auto rule = options_.images.check(*ref);
  if (!rule) return std::move(rule).error();
  Fingerprint fp = cached_fingerprint();
  if (!fp.healthy) return make_error(ErrorCode::kUnavailable, fp.detail);
  if (!spec.gpu_uuids.empty() && !spec.simulate_gpus && !fp.gpu_capable) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "this job asks for " + std::to_string(spec.gpu_uuids.size()) + " GPU(s) but " + fp.gpu_detail);
  }
  if (spec.vram_budget_bytes > 0 && (options_.vram_guard.empty() || ::access(options_.vram_guard.c_str(), R_OK) != 0)) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "this job asks for a share of a GPU, but this provider's VRAM guard library is missing (" +
                          (options_.vram_guard.empty() ? std::string("gpu.vram_guard is empty") : options_.vram_guard) +
                          "), so its VRAM budget could not be held; the provider reinstalls yonder or sets "
                          "gpu.vram_guard to libyonder-vram-guard.so");
  }
  return isolation_support(fp, spec.isolation, options_.gvisor_runtime, options_.socket);
}

Result<std::string> DockerExecutor::ensure_image(const std::string& image) {
  auto ref = parse_image_ref(image);
  if (!ref) return std::move(ref).error();
  auto rule = options_.images.check(*ref);
  if (!rule) return std::move(rule).error();
  const std::string& name = image;
  auto present = api_.call("GET", "/images/" + name + "/json", "inspect image " + image);
  bool have = present.ok();
  if (!have && present.error().code() != ErrorCode::kNotFound) return std::move(present).error();
  PullPolicy pull = options_.images.pull();
  if (pull == PullPolicy::kAlways || (!have && pull == PullPolicy::kMissing)) {
    std::string target = "/images/create?fromImage=" + url_encode(ref->repository()) +
                         (ref->digest.empty() ? "&tag=" + url_encode(ref->tag) : "&tag=" + url_encode(ref->digest));
    auto s = api_.stream("POST", target, "pull image " + image);
    if (!s) return std::move(s).error().with_context("executor.pull_policy is " + std::string(pull_policy_name(pull)));
    std::string buf, err;
    char chunk[8192];
    while (true) {
      auto n = (*s)->read_some(chunk, sizeof chunk, std::chrono::minutes(10));
      if (!n) return std::move(n).error().with_context("pulling " + image);
      if (*n == 0) break;
      buf.append(chunk, *n);
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        if (err.empty()) err = parse_pull_progress_error(std::string_view(buf).substr(0, nl));
        buf.erase(0, nl + 1);
      }
      if (buf.size() > (1 << 20)) buf.clear();  // a line that long is not progress
    }
    if (!err.empty()) return make_error(ErrorCode::kUnavailable, "pulling image " + image + " failed: " + err);
    present = api_.call("GET", "/images/" + name + "/json", "inspect image " + image);
    if (!present) return std::move(present).error();
  } else if (!have) {
    return make_error(ErrorCode::kNotFound, "image " + image +
                                                " is not on this provider and executor.pull_policy is never; ask the "
                                                "provider to load it (docker pull / docker load)");
  }
  auto info = parse_image_inspect(present->body);
  if (!info) return std::move(info).error();
  if (!rule->digest.empty()) {
    bool pinned = info->id == rule->digest;
    for (const auto& d : info->repo_digests) {
      if (d.size() > rule->digest.size() && d.compare(d.size() - rule->digest.size(), std::string::npos, rule->digest) == 0) {
        pinned = true;
      }
    }
    if (!pinned) {
      return make_error(ErrorCode::kPermissionDenied, "image " + image + " is not the digest the provider pinned (" +
                                                          rule->text + " in executor.image_allowlist); it is " + info->id);
    }
  }
  return info->id;
}

Status DockerExecutor::ensure_egress_network() {
  const std::string& name = options_.egress_network;
  auto found = api_.call("GET", "/networks/" + name, "look up the egress network");
  if (found) return ok_status();
  if (found.error().code() != ErrorCode::kNotFound) return std::move(found).error();
  nlohmann::json body = {{"Name", name},
                         {"Driver", "bridge"},
                         {"CheckDuplicate", true},
                         {"Labels", {{"org.yonder.role", "egress"}}},
                         {"Options", {{"com.docker.network.bridge.enable_icc", "false"}}}};
  auto created = api_.call("POST", "/networks/create", "create the egress network " + name, body.dump());
  // Another job may have created it a moment ago: that is fine.
  if (!created && created.error().code() != ErrorCode::kFailedPrecondition) return std::move(created).error();
  return ok_status();
}

Result<TaskHandle> DockerExecutor::start(const TaskSpec& spec) {
  YONDER_TRY(check(spec));
  auto started_at = std::chrono::steady_clock::now();
  auto image_id = ensure_image(spec.image);
  if (!image_id) return std::move(image_id).error();
  if (spec.network_egress) YONDER_TRY(ensure_egress_network());
  TaskHandle handle;
  handle.image_id = *image_id;  // what the audit log records: the name may be re-tagged later
  handle.backend = "docker";
  handle.job_id = spec.job_id;
  if (options_.workspaces) {
    std::string dir = options_.jobs_dir + "/" + spec.job_id;
    YONDER_TRY(os::make_dirs(dir, 0700));
    handle.workspace_image = dir + "/workspace.img";
    handle.workspace = dir + "/workspace";
    bool fresh = ::access(handle.workspace_image.c_str(), F_OK) != 0;
    if (fresh) {
      YONDER_TRY(os::create_ext4_image(handle.workspace_image, spec.limits.disk_bytes, kJobUid, kJobUid));
    }
    if (!os::is_mount_point(handle.workspace)) YONDER_TRY(os::mount_loop(handle.workspace_image, handle.workspace));
    // mkfs leaves an empty lost+found for fsck; the job's /workspace should
    // hold the uploaded folder and nothing of ours (e2fsck makes one again
    // if it ever needs it).
    if (fresh) ::rmdir((handle.workspace + "/lost+found").c_str());
    if (fresh && !spec.seed_dir.empty()) {
      if (auto copied = os::copy_tree(spec.seed_dir, handle.workspace, kJobUid, kJobUid); !copied) {
        (void)destroy(handle, true);
        return std::move(copied).error().with_context("putting the uploaded files into the job's workspace");
      }
    }
    // A working directory the upload did not bring: made here, for the
    // job's user. Docker (runc) would create it as root, 0755: the job
    // could not write into its own working directory.
    const std::string mount = "/workspace/";
    if (spec.workdir.size() > mount.size() && spec.workdir.compare(0, mount.size(), mount) == 0) {
      auto made = os::make_dirs_beneath(handle.workspace, spec.workdir.substr(mount.size()), 0755, kJobUid, kJobUid);
      if (!made) {
        (void)destroy(handle, true);
        return std::move(made).error().with_context("making the job's working directory " + spec.workdir);
      }
    }
  }
  bool podman = cached_fingerprint().engine == "podman";
  CreateContext ctx{options_.owner, handle.workspace, options_.gvisor_runtime, options_.egress_network, podman};
  if (spec.vram_budget_bytes > 0) {
    // The job's VRAM ledger (gpu/vram_guard/ledger.h), in a folder of its
    // own that the job's user may write: every process of the job charges it.
    ctx.vram_dir = vram_dir(spec.job_id);
    ctx.vram_guard = options_.vram_guard;
    Status made = os::make_dirs(options_.jobs_dir + "/" + spec.job_id, 0700);
    if (made) made = os::make_dirs_beneath(options_.jobs_dir + "/" + spec.job_id, "vram", 0700, kJobUid, kJobUid);
    std::string ledger = ctx.vram_dir + "/" + kVramLedgerFile;
    if (made) {
      if (int rc = yonder_vram_ledger_create(ledger.c_str(), spec.vram_budget_bytes); rc != 0) {
        made = make_error(ErrorCode::kInternal, "creating the job's VRAM ledger " + ledger + ": " + std::strerror(-rc));
      }
    }
    if (!made) {
      (void)destroy(handle, true);
      return std::move(made).error().with_context("preparing the job's share of a GPU");
    }
  }
  auto body = build_create_body(spec, ctx).dump();
  auto create_at = std::chrono::steady_clock::now();
  auto created = api_.call("POST", "/containers/create?name=" + container_name(spec.job_id), "create the job's container", body);
  auto start_at = std::chrono::steady_clock::now();
  if (!created) {
    (void)destroy(handle, true);
    return std::move(created).error();
  }
  auto id = parse_create_response(created->body);
  if (!id) {
    (void)destroy(handle, true);
    return std::move(id).error();
  }
  handle.task_id = *id;
  if (spec.isolation == Isolation::kGvisor) {
    auto r = api_.call("GET", cpath(*id) + "/json", "inspect the job's new container");
    auto info = r ? parse_inspect(r->body) : Result<ContainerInfo>(std::move(r).error());
    Status enforced = info ? runtime_enforced(spec.isolation, options_.gvisor_runtime, info->runtime, options_.socket)
                           : Status(std::move(info).error());
    if (!enforced) {
      (void)destroy(handle, true);
      return std::move(enforced).error();
    }
  }
  if (podman) {
    if (Status watched = init_and_watch(*id); !watched) {
      (void)destroy(handle, true);
      return std::move(watched).error();
    }
  }
  auto started = api_.call("POST", cpath(*id) + "/start", "start the job's container");
  auto running_at = std::chrono::steady_clock::now();
  if (!started) {
    Error e = std::move(started).error();
    (void)destroy(handle, true);
    if (e.message().find("could not select device driver") != std::string::npos) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "the Docker engine cannot pass GPUs to containers (" + e.message() +
                            "); install the NVIDIA container toolkit and restart dockerd");
    }
    return e;
  }
  ExecutorLatencies& latencies = executor_latencies();
  latencies.container_create.observe(start_at - create_at);
  latencies.container_start.observe(running_at - start_at);
  latencies.docker_task_start.observe(running_at - started_at);
  return handle;
}

Result<TaskStatus> DockerExecutor::inspect(const TaskHandle& handle) {
  auto r = api_.call("GET", cpath(handle.task_id) + "/json", "inspect the job's container");
  if (!r) {
    if (r.error().code() == ErrorCode::kNotFound) return TaskStatus{};
    return std::move(r).error();
  }
  auto info = parse_inspect(r->body);
  if (!info) return std::move(info).error();
  TaskStatus st;
  st.pid = info->pid;
  if (info->running) {
    st.state = TaskState::kRunning;
  } else if (info->status == "created") {
    st.state = TaskState::kCreated;
  } else {
    st.state = TaskState::kExited;
    st.exit = {info->exit_code, info->oom_killed || watched_oom(handle.task_id).value_or(false), info->error, ""};
  }
  if (st.state == TaskState::kRunning) watch_running(handle.task_id, st.pid);
  return st;
}

Status DockerExecutor::init_and_watch(const std::string& id) {
  // libpod's own endpoint on the same socket: the runtime creates the
  // container's process and cgroup without running the job, so the watch
  // is armed before the job can allocate anything.
  YONDER_TRY(api_.call("POST", "/libpod/containers/" + id + "/init", "prepare the job's container (Podman init)"));
  auto r = api_.call("GET", cpath(id) + "/json", "inspect the job's new container");
  if (!r) return std::move(r).error();
  auto info = parse_inspect(r->body);
  if (!info) return std::move(info).error();
  OomWatchSlot slot = arm_watch(info->pid);
  std::lock_guard lock(mutex_);
  oom_watches_[id] = std::move(slot);
  return ok_status();
}

DockerExecutor::OomWatchSlot DockerExecutor::arm_watch(int pid) {
  OomWatchSlot slot;
  auto watch = os::OomWatch::arm(pid);
  if (watch) {
    slot.watch = std::move(*watch);
  } else {
    slot.unavailable = watch.error().message();
  }
  return slot;
}

void DockerExecutor::watch_running(const std::string& id, int pid) {
  if (pid <= 0) return;
  {
    std::lock_guard lock(mutex_);
    if (oom_watches_.count(id) != 0) return;
  }
  if (cached_fingerprint().engine != "podman") return;
  // Found running after a restart: a kill before this moment is not seen.
  OomWatchSlot slot = arm_watch(pid);
  std::lock_guard lock(mutex_);
  oom_watches_.try_emplace(id, std::move(slot));
}

std::optional<bool> DockerExecutor::watched_oom(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = oom_watches_.find(id);
  if (it == oom_watches_.end() || it->second.watch == nullptr) return std::nullopt;
  return it->second.watch->oom_killed();
}

Result<TaskStatus> DockerExecutor::recover(const TaskHandle& handle) {
  if (handle.backend != "docker" || handle.task_id.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "the stored handle of job " + handle.job_id + " is not a Docker handle");
  }
  return inspect(handle);
}

Result<ExitInfo> DockerExecutor::wait_for(const std::string& id, std::chrono::milliseconds timeout,
                                          const CancelSlot& on_cancel) {
  auto token = std::make_shared<StreamCancel>();
  if (on_cancel) on_cancel(token);
  auto s = api_.stream("POST", cpath(id) + "/wait?condition=not-running", "wait for the job's container");
  if (!s) return std::move(s).error();
  if (!token->attach(s->get())) return make_error(ErrorCode::kUnavailable, "cancelled");
  auto body = (*s)->read_all(64 * 1024, timeout);
  token->detach();
  if (!body) return std::move(body).error();
  auto w = parse_wait(*body);
  if (!w) return std::move(w).error();
  ExitInfo exit{w->status_code, false, w->error, ""};
  if (auto watched = watched_oom(id)) {
    // Podman: its OOMKilled flag is never set; the cgroup watch is the answer.
    exit.oom_killed = *watched;
    return exit;
  }
  // OOMKilled is a flag of the container, not of the exit status. Docker
  // sets it from containerd's OOM event, which can arrive just after the
  // exit (seen under load): a SIGKILLed job (137) is asked again briefly.
  for (int ask = 0; ask < 10; ++ask) {
    auto r = api_.call("GET", cpath(id) + "/json", "inspect the job's container");
    if (!r) break;
    auto info = parse_inspect(r->body);
    if (!info) break;
    exit.oom_killed = info->oom_killed;
    if (exit.error.empty()) exit.error = info->error;
    if (exit.oom_killed || exit.exit_code != 137) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (exit.exit_code == 137 && !exit.oom_killed && exit.error.empty()) {
    std::lock_guard lock(mutex_);
    auto it = oom_watches_.find(id);
    if (it != oom_watches_.end() && !it->second.unavailable.empty()) {
      exit.error = "killed by SIGKILL; whether for memory is unknown: Podman does not report out-of-memory kills and " +
                   it->second.unavailable;
    }
  }
  return exit;
}

Result<ExitInfo> DockerExecutor::wait(const TaskHandle& handle, const CancelSlot& on_cancel) {
  return wait_for(handle.task_id, os::HttpStream::kNoTimeout, on_cancel);
}

Status DockerExecutor::signal(const TaskHandle& handle, int sig) {
  auto r = api_.call("POST", cpath(handle.task_id) + "/kill?signal=" + std::to_string(sig), "signal the job's container");
  if (!r && r.error().code() != ErrorCode::kFailedPrecondition) return std::move(r).error();  // 409: not running
  return ok_status();
}

Status DockerExecutor::stop(const TaskHandle& handle, int sig, std::chrono::seconds grace) {
  YONDER_TRY(signal(handle, sig));
  auto done = wait_for(handle.task_id, grace, {});
  if (done) return ok_status();
  if (done.error().code() == ErrorCode::kNotFound) return ok_status();
  YONDER_TRY(signal(handle, SIGKILL));
  auto killed = wait_for(handle.task_id, std::chrono::seconds(30), {});
  if (!killed && killed.error().code() != ErrorCode::kNotFound) return std::move(killed).error();
  return ok_status();
}

std::string DockerExecutor::vram_dir(const std::string& job_id) const {
  return options_.jobs_dir + "/" + job_id + "/vram";
}

Status DockerExecutor::destroy(const TaskHandle& handle, bool remove_workspace) {
  if (!handle.task_id.empty()) YONDER_TRY(remove_task(handle.task_id));
  if (!handle.job_id.empty() && is_hex_id(handle.job_id)) {
    // A share's ledger: nothing reads it once the task is gone.
    std::error_code ec;
    std::filesystem::remove_all(vram_dir(handle.job_id), ec);
  }
  if (!handle.workspace.empty()) {
    // The job is over: its promise of disk ends, its files stay. Best
    // effort (a file system without discard keeps the image whole).
    if (!remove_workspace && os::is_mount_point(handle.workspace)) (void)os::trim_free_space(handle.workspace);
    YONDER_TRY(os::unmount(handle.workspace));
  }
  if (remove_workspace && !handle.workspace_image.empty()) {
    std::error_code ec;
    std::filesystem::remove(handle.workspace_image, ec);
    std::filesystem::remove(handle.workspace, ec);
    // The job's folder, if nothing else (a log kept by the caller) is in it.
    std::filesystem::remove(std::filesystem::path(handle.workspace).parent_path(), ec);
  }
  return ok_status();
}

Status DockerExecutor::remove_task(const std::string& task_id) {
  auto r = api_.call("DELETE", cpath(task_id) + "?force=1&v=1", "remove the job's container");
  if (!r && r.error().code() != ErrorCode::kNotFound) return std::move(r).error();
  OomWatchSlot gone;  // destroyed (its thread joined) outside the lock
  {
    std::lock_guard lock(mutex_);
    auto it = oom_watches_.find(task_id);
    if (it != oom_watches_.end()) {
      gone = std::move(it->second);
      oom_watches_.erase(it);
    }
  }
  return ok_status();
}

Result<TaskStats> DockerExecutor::stats(const TaskHandle& handle) {
  // one-shot (Docker API 1.41): one reading now, not two a second apart;
  // the CPU figure is cumulative (a rate needs two samples anyway), so this
  // answers in milliseconds instead of about two seconds. Podman's
  // compatible API is asked as before.
  bool one_shot = cached_fingerprint().engine == "docker";
  auto r = api_.call("GET", cpath(handle.task_id) + (one_shot ? "/stats?stream=false&one-shot=true" : "/stats?stream=false"),
                     "read the job's resource use");
  if (!r) return std::move(r).error();
  return parse_stats(r->body);
}

Result<std::vector<OwnedTask>> DockerExecutor::list_owned() {
  nlohmann::json filters = {{"label", {std::string(kOwnerLabel) + "=" + options_.owner}}};
  auto r = api_.call("GET", "/containers/json?all=1&filters=" + url_encode(filters.dump()), "list the node's containers");
  if (!r) return std::move(r).error();
  auto list = parse_container_list(r->body);
  if (!list) return std::move(list).error();
  std::vector<OwnedTask> out;
  for (auto& c : *list) {
    auto owner = c.labels.find(kOwnerLabel);
    if (owner == c.labels.end() || owner->second != options_.owner) continue;  // the filter is the engine's; check
    auto job = c.labels.find(kJobLabel);
    OwnedTask t{job == c.labels.end() ? "" : job->second, c.id, c.state == "running", {}};
    t.handle.backend = "docker";
    t.handle.job_id = t.job_id;
    t.handle.task_id = c.id;
    if (options_.workspaces && is_hex_id(t.job_id)) {
      t.handle.workspace = options_.jobs_dir + "/" + t.job_id + "/workspace";
      t.handle.workspace_image = options_.jobs_dir + "/" + t.job_id + "/workspace.img";
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool DockerExecutor::owns_pid(const TaskHandle& handle, int pid) {
  if (pid <= 0 || handle.task_id.size() < 12) return false;
  auto cg = os::read_small_file("/proc/" + std::to_string(pid) + "/cgroup", 64 * 1024);
  return cg.ok() && cg->find(handle.task_id) != std::string::npos;
}

}  // namespace yonder::exec::docker
