#include "exec/slurm/slurm_executor.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "exec/executor_metrics.h"
#include "os/files.h"
#include "os/tree_copy.h"
#include "os/unique_fd.h"

namespace yonder::exec::slurm {
namespace {

constexpr auto kCommandTimeout = std::chrono::seconds(30);
constexpr const char* kWorkspaceMount = "/workspace";
constexpr size_t kLogChunk = 64 * 1024;

bool is_job_id(const std::string& s) {
  return !s.empty() && s.size() <= 128 &&
         s.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.-") == std::string::npos;
}

// Single quotes for /bin/sh: 'it'\''s'.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool is_env_name(const std::string& s) {
  if (s.empty() || s.size() > 256 || (s[0] >= '0' && s[0] <= '9')) return false;
  return s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
}

// The job's view of a path: /workspace/x is <workspace>/x on the cluster.
std::string host_path(const std::string& path, const std::string& workspace) {
  std::string mount = kWorkspaceMount;
  if (path == mount) return workspace;
  if (path.compare(0, mount.size() + 1, mount + "/") == 0) return workspace + path.substr(mount.size());
  return path;
}

// A Cancel for the polling loops: wakes the sleeper and makes it return.
class PollCancel final : public Cancel {
 public:
  void cancel() override {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    cv_.notify_all();
  }
  // Sleeps `d` or until cancelled; false when cancelled.
  bool sleep(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !cv_.wait_for(lock, d, [&] { return cancelled_; });
  }
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

int64_t mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

SlurmExecutor::SlurmExecutor(SlurmOptions options) : options_(std::move(options)) {
  if (::geteuid() == 0 && !options_.run_as.empty()) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(options_.run_as.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
      run_uid_ = static_cast<int>(pw.pw_uid);
      run_gid_ = static_cast<int>(pw.pw_gid);
    }
  }
}

Result<os::ProcessOutput> SlurmExecutor::run(const std::string& program, std::vector<std::string> args) {
  std::vector<std::string> argv;
  if (!options_.conf.empty()) {
    argv = {"/usr/bin/env", "SLURM_CONF=" + options_.conf};
  }
  argv.push_back(options_.bin_dir.empty() ? program : options_.bin_dir + "/" + program);
  for (auto& a : args) argv.push_back(std::move(a));
  auto out = os::run_capture(argv, kCommandTimeout, kMaxSlurmOutputBytes + 1);
  if (!out) {
    return std::move(out).error().with_context("running Slurm's " + program +
                                               " (install slurm-client, or set slurm.bin_dir to its folder)");
  }
  if (out->exit_code == 127 && !options_.conf.empty()) {
    return make_error(ErrorCode::kNotFound, "cannot run Slurm's " + program + " from '" + options_.bin_dir +
                                                "'; install slurm-client or set slurm.bin_dir");
  }
  return out;
}

Result<std::vector<SlurmNodeGpus>> SlurmExecutor::gpu_capacity() {
  std::vector<std::string> args = {"-h", "-N", "-O", "NodeList:|,StateLong:|,Gres:|,GresUsed:|"};
  if (!options_.partition.empty()) args.push_back("--partition=" + options_.partition);
  auto out = run("sinfo", std::move(args));
  if (!out) return std::move(out).error();
  if (out->exit_code != 0) {
    return make_error(ErrorCode::kUnavailable, "the Slurm controller did not answer sinfo: " +
                                                   sbatch_error_text(out->output) + " (is slurmctld running?)");
  }
  return parse_sinfo_gpus(out->output);
}

Fingerprint SlurmExecutor::fingerprint() {
  Fingerprint fp;
  fp.backend = "slurm";
  fp.engine = "slurm";
  auto version = run("sinfo", {"--version"});
  if (!version || version->exit_code != 0) {
    fp.detail = version ? "sinfo --version failed: " + sbatch_error_text(version->output) : version.error().to_string();
    return fp;
  }
  fp.version = std::string(version->output.substr(0, version->output.find('\n')).substr(0, 64));
  auto nodes = gpu_capacity();
  if (!nodes) {
    fp.detail = nodes.error().to_string();
    return fp;
  }
  fp.healthy = true;
  int gpus = 0;
  for (const auto& n : *nodes) gpus += n.total;
  fp.gpu_capable = gpus > 0;
  if (!fp.gpu_capable) {
    fp.gpu_detail = "the Slurm cluster" + (options_.partition.empty() ? std::string() : " partition " + options_.partition) +
                    " has no GPUs configured (GresTypes=gpu and Gres=gpu:N in slurm.conf)";
  }
  return fp;
}

Status SlurmExecutor::check(const TaskSpec& spec) {
  if (!is_job_id(spec.job_id)) {
    return make_error(ErrorCode::kInvalidArgument, "job id '" + spec.job_id.substr(0, 64) + "' is not usable as a name");
  }
  if (options_.workdir_root.empty()) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "slurm.workdir_root is not set: name a folder every cluster node sees (a shared file system)");
  }
  if (spec.command.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "a job on a Slurm provider needs a command: there is no image whose default could run");
  }
  if (spec.tty) {
    return make_error(ErrorCode::kFailedPrecondition, "a Slurm provider cannot give a job a terminal; run it without --tty");
  }
  if (spec.isolation == Isolation::kGvisor) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "a Slurm provider runs jobs on the cluster's nodes, without gVisor; ask for standard isolation");
  }
  if (spec.vram_budget_bytes > 0) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "a Slurm provider's cluster lends whole GPUs only; ask for --gpus 1 instead of a share");
  }
  for (const auto& [k, v] : spec.env) {
    if (!is_env_name(k)) return make_error(ErrorCode::kInvalidArgument, "environment name '" + k.substr(0, 64) + "' is not valid");
  }
  return ok_status();
}

std::string SlurmExecutor::batch_script(const TaskSpec& spec, const std::string& workspace) {
  std::string s = "#!/bin/sh\n# Written by yonderd for job " + spec.job_id + ".\n";
  s += "export PATH=/usr/local/bin:/usr/bin:/bin\n";
  s += "export HOME=" + sh_quote(workspace) + "\n";
  s += "export YONDER_WORKSPACE=" + sh_quote(workspace) + "\n";
  s += "export YONDER_JOB_ID=" + sh_quote(spec.job_id) + "\n";
  for (const auto& [k, v] : spec.env) s += "export " + k + "=" + sh_quote(v) + "\n";
  s += "cd " + sh_quote(host_path(spec.workdir, workspace)) + " || exit 125\n";
  s += "exec";
  for (const auto& a : spec.command) s += " " + sh_quote(a);
  return s + "\n";
}

std::vector<std::string> SlurmExecutor::sbatch_argv(const TaskSpec& spec, const std::string& script) const {
  std::string dir = job_dir(spec.job_id);
  int64_t cpus = std::max<int64_t>(1, (spec.limits.nano_cpus + 999'999'999) / 1'000'000'000);
  int64_t mem_mib = std::max<int64_t>(1, spec.limits.memory_bytes >> 20);
  std::vector<std::string> a = {"--parsable",
                                "--export=NONE",
                                "--job-name=yonder-" + spec.job_id,
                                "--comment=yonder:" + options_.owner + ":" + spec.job_id,
                                "--output=" + dir + "/output.log",
                                "--chdir=" + dir,
                                "--nodes=1",
                                "--ntasks=1",
                                "--cpus-per-task=" + std::to_string(cpus),
                                "--mem=" + std::to_string(mem_mib) + "M"};
  if (spec.limits.wall_time_s > 0) {
    // Slurm counts minutes; "M:SS" is accepted and rounded up.
    a.push_back("--time=" + std::to_string(spec.limits.wall_time_s / 60) + ":" +
                std::to_string(spec.limits.wall_time_s % 60));
  }
  if (!spec.gpu_uuids.empty()) a.push_back("--gpus=" + std::to_string(spec.gpu_uuids.size()));
  if (!options_.partition.empty()) a.push_back("--partition=" + options_.partition);
  if (!options_.account.empty()) a.push_back("--account=" + options_.account);
  if (run_uid_ >= 0) {
    a.push_back("--uid=" + std::to_string(run_uid_));
    a.push_back("--gid=" + std::to_string(run_gid_));
  }
  a.push_back(script);
  return a;
}

Result<TaskHandle> SlurmExecutor::start(const TaskSpec& spec) {
  YONDER_TRY(check(spec));
  auto started_at = std::chrono::steady_clock::now();
  TaskHandle handle;
  handle.backend = "slurm";
  handle.job_id = spec.job_id;
  std::string dir = job_dir(spec.job_id);
  handle.workspace = dir + "/workspace";
  int uid = run_uid_ >= 0 ? run_uid_ : static_cast<int>(::geteuid());
  int gid = run_gid_ >= 0 ? run_gid_ : static_cast<int>(::getegid());
  auto fail = [&](Error e) -> Result<TaskHandle> {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return e;
  };
  YONDER_TRY(os::make_dirs(dir, 0755));
  if (::mkdir(handle.workspace.c_str(), 0755) != 0 && errno != EEXIST) {
    return fail(make_error(ErrorCode::kUnavailable, "cannot create the job's workspace " + handle.workspace));
  }
  if (::chown(handle.workspace.c_str(), uid, gid) != 0 || ::chown(dir.c_str(), uid, gid) != 0) {
    return fail(make_error(ErrorCode::kPermissionDenied, "cannot give the job's folder " + dir + " to its user"));
  }
  if (!spec.seed_dir.empty()) {
    if (auto copied = os::copy_tree(spec.seed_dir, handle.workspace, uid, gid); !copied) {
      return fail(std::move(copied).error().with_context("putting the uploaded files into the job's workspace"));
    }
  }
  std::string mount = std::string(kWorkspaceMount) + "/";
  if (spec.workdir.size() > mount.size() && spec.workdir.compare(0, mount.size(), mount) == 0) {
    if (auto made = os::make_dirs_beneath(handle.workspace, spec.workdir.substr(mount.size()), 0755, uid, gid); !made) {
      return fail(std::move(made).error().with_context("making the job's working directory " + spec.workdir));
    }
  }
  std::string script = dir + "/job.sh";
  {
    std::ofstream f(script, std::ios::trunc);
    f << batch_script(spec, handle.workspace);
    if (!f.flush()) return fail(make_error(ErrorCode::kUnavailable, "cannot write the job's batch script " + script));
  }
  ::chmod(script.c_str(), 0755);
  auto submit_at = std::chrono::steady_clock::now();
  auto out = run("sbatch", sbatch_argv(spec, script));
  auto submitted_at = std::chrono::steady_clock::now();
  if (!out) return fail(std::move(out).error());
  if (out->exit_code != 0) {
    return fail(make_error(ErrorCode::kFailedPrecondition, "the Slurm cluster refused the job: " + sbatch_error_text(out->output)));
  }
  auto id = parse_sbatch_reply(out->output);
  if (!id) return fail(std::move(id).error());
  handle.task_id = *id;
  executor_latencies().slurm_submit.observe(submitted_at - submit_at);
  executor_latencies().slurm_task_start.observe(submitted_at - started_at);
  return handle;
}

Result<SlurmJob> SlurmExecutor::query(const std::string& slurm_id) {
  if (!is_slurm_job_id(slurm_id)) {
    return make_error(ErrorCode::kInvalidArgument, "'" + slurm_id.substr(0, 32) + "' is not a Slurm job id");
  }
  auto out = run("scontrol", {"show", "job", "-o", slurm_id});
  if (!out) return std::move(out).error();
  auto job = parse_scontrol_job(out->output);
  if (job || job.error().code() != ErrorCode::kNotFound) {
    if (!job && out->exit_code != 0) {
      return make_error(ErrorCode::kUnavailable, "the Slurm controller did not answer: " + sbatch_error_text(out->output));
    }
    return job;
  }
  // slurmctld forgets a finished job after MinJobAge; the completion log
  // (jobcomp/filetxt, or accounting storage) still has it.
  for (std::vector<std::string> args : {std::vector<std::string>{"-c"}, std::vector<std::string>{}}) {
    for (auto s : {"-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-S", "2000-01-01", "-j"}) args.push_back(s);
    args.push_back(slurm_id);
    auto acct = run("sacct", std::move(args));
    if (!acct || acct->exit_code != 0) continue;
    auto found = parse_sacct(acct->output, slurm_id);
    if (found && *found) return std::move(**found);
  }
  return make_error(ErrorCode::kNotFound, "the Slurm cluster has no record of job " + slurm_id);
}

Result<TaskStatus> SlurmExecutor::inspect(const TaskHandle& handle) {
  auto job = query(handle.task_id);
  if (!job) {
    if (job.error().code() == ErrorCode::kNotFound) return TaskStatus{};
    return std::move(job).error();
  }
  return task_status(*job);
}

Result<TaskStatus> SlurmExecutor::recover(const TaskHandle& handle) {
  if (handle.backend != "slurm" || !is_slurm_job_id(handle.task_id)) {
    return make_error(ErrorCode::kInvalidArgument, "the stored handle of job " + handle.job_id + " is not a Slurm handle");
  }
  return inspect(handle);
}

Result<ExitInfo> SlurmExecutor::wait(const TaskHandle& handle, const CancelSlot& on_cancel) {
  auto token = std::make_shared<PollCancel>();
  if (on_cancel) on_cancel(token);
  while (true) {
    auto job = query(handle.task_id);
    if (!job) return std::move(job).error();
    if (is_terminal_state(job->state)) return task_status(*job).exit;
    if (!token->sleep(options_.poll)) return make_error(ErrorCode::kUnavailable, "cancelled");
  }
}

Status SlurmExecutor::signal(const TaskHandle& handle, int sig) {
  if (!is_slurm_job_id(handle.task_id)) return make_error(ErrorCode::kInvalidArgument, "not a Slurm job id");
  // --full: the batch script too, not only its steps.
  auto out = run("scancel", {"--full", "--signal=" + std::to_string(sig), handle.task_id});
  if (!out) return std::move(out).error();
  return ok_status();  // a job that already ended: nothing to signal
}

Status SlurmExecutor::stop(const TaskHandle& handle, int sig, std::chrono::seconds grace) {
  auto job = query(handle.task_id);
  if (!job) return job.error().code() == ErrorCode::kNotFound ? ok_status() : Status(std::move(job).error());
  if (is_terminal_state(job->state)) return ok_status();
  if (job->state != "PENDING") {
    YONDER_TRY(signal(handle, sig));
    auto deadline = std::chrono::steady_clock::now() + grace;
    PollCancel sleeper;
    while (std::chrono::steady_clock::now() < deadline) {
      auto now = query(handle.task_id);
      if (!now || is_terminal_state(now->state)) return ok_status();
      sleeper.sleep(options_.poll);
    }
  }
  // scancel without a signal: Slurm's own SIGTERM, KillWait, SIGKILL.
  YONDER_TRY(remove_task(handle.task_id));
  PollCancel sleeper;
  for (int i = 0; i < 240; ++i) {
    auto now = query(handle.task_id);
    if (!now || is_terminal_state(now->state)) return ok_status();
    sleeper.sleep(options_.poll);
  }
  return make_error(ErrorCode::kUnavailable, "Slurm job " + handle.task_id + " did not end after scancel");
}

Status SlurmExecutor::remove_task(const std::string& task_id) {
  if (!is_slurm_job_id(task_id)) return make_error(ErrorCode::kInvalidArgument, "not a Slurm job id");
  auto out = run("scancel", {task_id});
  if (!out) return std::move(out).error();
  return ok_status();  // "already completed" or "invalid job id": nothing left to cancel
}

Status SlurmExecutor::destroy(const TaskHandle& handle, bool remove_workspace) {
  if (is_slurm_job_id(handle.task_id)) {
    auto job = query(handle.task_id);
    if (job && !is_terminal_state(job->state)) YONDER_TRY(remove_task(handle.task_id));
  }
  if (remove_workspace && is_job_id(handle.job_id) && !options_.workdir_root.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(job_dir(handle.job_id), ec);
    if (ec) return make_error(ErrorCode::kUnavailable, "cannot remove " + job_dir(handle.job_id) + ": " + ec.message());
  }
  return ok_status();
}

Result<TaskStats> SlurmExecutor::stats(const TaskHandle&) {
  return make_error(ErrorCode::kFailedPrecondition, "a Slurm provider does not report a job's resource use (sstat needs "
                                                    "accounting); see the cluster's own tools");
}

Result<std::unique_ptr<ExecSession>> SlurmExecutor::exec(const TaskHandle&, const ExecSpec&) {
  return make_error(ErrorCode::kFailedPrecondition,
                    "a Slurm provider cannot run commands inside a job yet; read the job's logs instead");
}

Status SlurmExecutor::logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
                           const CancelSlot& on_cancel) {
  auto token = std::make_shared<PollCancel>();
  if (on_cancel) on_cancel(token);
  std::string dir = job_dir(handle.job_id);
  std::string path = dir + "/output.log";
  // A file has no per-line times: an entry's time is the submission time
  // (the batch script's mtime) plus the byte offset where it ends, in ns.
  // Monotonic, and a resume after a restart (since_unix_ns) maps back to
  // the exact byte.
  int64_t base = mtime_ns(dir + "/job.sh");
  uint64_t offset = 0;
  if (options.since_unix_ns > base) offset = static_cast<uint64_t>(options.since_unix_ns - base);
  std::vector<char> buf(kLogChunk);
  bool ended = false;
  while (true) {
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    bool progressed = false;
    if (fd.get() >= 0) {
      while (true) {
        ssize_t n = ::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(offset));
        if (n <= 0) break;
        offset += static_cast<uint64_t>(n);
        progressed = true;
        if (!sink(LogStream::kStdout, base + static_cast<int64_t>(offset), std::string_view(buf.data(), static_cast<size_t>(n)))) {
          return ok_status();
        }
        if (token->cancelled()) return ok_status();
      }
    }
    if (!options.follow || ended) return ok_status();
    if (!progressed) {
      auto job = query(handle.task_id);
      // Ended: one more read for what was written last, then stop.
      if (!job || is_terminal_state(job->state)) {
        ended = true;
        continue;
      }
      if (!token->sleep(options_.poll)) return ok_status();
    }
  }
}

Result<std::vector<OwnedTask>> SlurmExecutor::list_owned() {
  auto out = run("squeue", {"-h", "-t", "all", "-o", "%i|%T|%j|%k|%r"});
  if (!out) return std::move(out).error();
  if (out->exit_code != 0) {
    return make_error(ErrorCode::kUnavailable, "the Slurm controller did not answer squeue: " +
                                                   sbatch_error_text(out->output) + " (is slurmctld running?)");
  }
  auto jobs = parse_squeue(out->output);
  if (!jobs) return std::move(jobs).error();
  std::string prefix = "yonder:" + options_.owner + ":";
  std::vector<OwnedTask> owned;
  for (const auto& j : *jobs) {
    if (j.comment.compare(0, prefix.size(), prefix) != 0) continue;
    std::string job_id = j.comment.substr(prefix.size());
    if (!is_job_id(job_id)) continue;
    OwnedTask t;
    t.job_id = job_id;
    t.task_id = j.job_id;
    // Queued in Slurm counts as running: the cluster has it and will run it.
    t.running = !is_terminal_state(j.state);
    t.handle.backend = "slurm";
    t.handle.job_id = job_id;
    t.handle.task_id = j.job_id;
    t.handle.workspace = job_dir(job_id) + "/workspace";
    owned.push_back(std::move(t));
  }
  return owned;
}

bool SlurmExecutor::owns_pid(const TaskHandle&, int) {
  return false;  // the job's processes run on cluster nodes, not in this host's pid space
}

}  // namespace yonder::exec::slurm
