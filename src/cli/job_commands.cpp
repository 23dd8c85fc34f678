#include "cli/job_commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "base/bytes.h"
#include "base/terminal_text.h"
#include "cli/array_commands.h"
#include "cli/cp_paths.h"
#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/fetched_files.h"
#include "cli/job_logs.h"
#include "cli/job_status_commands.h"
#include "cli/mesh_commands.h"
#include "cli/mesh_job_commands.h"
#include "cli/progress.h"
#include "cli/run_attach.h"
#include "cli/run_options.h"
#include "cli/shown.h"
#include "cli/signal_pipe.h"
#include "crypto/scope.h"
#include "os/unix_http.h"
#include "transfer/tree_fetch.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// Brings files of the job's workspace into `dir` (the daemon writes them;
// see jobs/files/fetch_consumer.h). `paths` empty: what differs from `dir`.
// `no_limit`: past the outputs budget too (paths named lift it as well).
Result<json> fetch_files(const Context& ctx, const std::string& job, const std::string& dir,
                         const std::vector<std::string>& paths, bool no_limit = false, bool dry_run = false) {
  json body = {{"job_id", job}, {"dir", dir}};
  if (dry_run) body["dry_run"] = true;
  if (!paths.empty()) body["paths"] = paths;
  if (no_limit) body["outputs_limit"] = "off";
  std::string transfer_id = new_transfer_id();
  body["transfer_id"] = transfer_id;
  return with_transfer_progress(ctx, transfer_id, [&] { return api(ctx, "POST", "/v1/jobs/fetch", body, std::chrono::minutes(30)); });
}

// Follows the job until it ends or we detach, serving its -p forwards
// and handling Ctrl-C (cli/run_attach.h).
Result<Attached> attach(const Context& ctx, const std::string& id, const RunArgs& a) {
  AttachOptions options;
  for (const auto& p : a.ports) {
    auto pair = parse_port_pair(p);  // checked by effective_run_args
    if (pair) options.forwards.push_back(*pair);
  }
  options.prompt = isatty(STDIN_FILENO) != 0;
  options.raw = a.raw;
  return attach_to_job(ctx, id, options);
}

// The CLI was interrupted while its job was being uploaded or submitted:
// asks the daemon to cancel and waits for the outcome, so the job is never
// left running behind the user's back.
int cancel_submit(const Context& ctx, const std::string& transfer_id) {
  std::fprintf(stderr, "\nyonder: cancelling...\n");
  auto c = api(ctx, "POST", "/v1/transfers/cancel", {{"id", transfer_id}});
  if (!c) return fail(ctx, c.error());
  json t = *c;
  for (int i = 0; i < 600 && !t.value("ended", false); ++i) {
    ::poll(nullptr, 0, 100);
    auto r = api(ctx, "GET", "/v1/transfers?id=" + transfer_id);
    if (r && (*r)["transfers"].is_array() && !(*r)["transfers"].empty()) t = (*r)["transfers"][0];
  }
  std::string outcome = t.value("outcome", "");
  std::string job = t.value("job_id", "");
  if (outcome == "stopped") {
    std::fprintf(stderr, "yonder: cancelled; job %s had already been submitted and was stopped\n", job.c_str());
  } else if (outcome == "submitted") {
    // The submit finished before the cancel arrived: stop it ourselves.
    auto s = api(ctx, "POST", "/v1/jobs/stop", {{"job_id", job}});
    std::fprintf(stderr, "yonder: cancelled; job %s had already been submitted: %s\n", job.c_str(),
                 s ? "stopped" : ("stopping it failed: " + s.error().message() + "; run `yonder stop " + job + "`").c_str());
  } else if (outcome.empty()) {
    std::fprintf(stderr, "yonder: cancel requested, but the daemon has not confirmed it; check `yonder ps` and `yonder transfers`\n");
    return kExitError;
  } else {
    std::fprintf(stderr, "yonder: cancelled; nothing was submitted\n");
  }
  return 128 + SIGINT;
}

}  // namespace

int cmd_run(const Context& ctx, const RunArgs& given) {
  auto effective = effective_run_args(given, ctx.env);  // the job file and env files under the flags
  if (!effective) return print_error(effective.error(), kExitUsage);
  // No --on, no `on` in the job file: the default provider, if one is set.
  if (effective->peer.empty() && !effective->mesh) effective->peer = ctx.cfg.get("run.default_on");
  const RunArgs& a = *effective;
  // --out names paths inside the job's workspace: "../x" or "/etc" are
  // refused now, before anything is uploaded or run.
  for (const auto& o : a.out) {
    auto n = transfer::normalize_request_path(o);
    if (!n) return print_error(Error(n.error()).with_context("--out"), kExitUsage);
  }
  if (a.mesh && !a.peer.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--mesh chooses the provider itself; drop --on (or `on` in the job file)"),
                       kExitUsage);
  }
  if (a.mesh && !a.name.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--name names a job run with --on; a mesh job goes by its mesh job id"),
                       kExitUsage);
  }
  if (!a.mesh && (a.cuda || !a.labels.empty() || a.group)) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--cuda, --label and --group are placement needs: add --mesh"),
                       kExitUsage);
  }
  if (a.peer.empty() && !a.mesh) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--on is required: the provider (a peer name or node id), or `on` in the job file, "
                                  "or a default (yonder config set run.default_on PEER, or YONDER_ON=PEER); "
                                  "or --mesh to let Yonder choose among your paired providers"),
                       kExitUsage);
  }
  if (a.image.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--image is required: the image to run, one the provider allows "
                                  "(its executor.image_allowlist)"),
                       kExitUsage);
  }
  if (a.command.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "give the command after -- (yonder run ... -- python train.py), or `command` in "
                                  "the job file"),
                       kExitUsage);
  }
  if (a.detach && !a.ports.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "-p forwards last while `yonder run` is attached; with -d, forward with "
                                  "`yonder forward JOB LOCAL:REMOTE` once the job runs"),
                       kExitUsage);
  }
  auto request = job_request_of(a);
  if (!request) return print_error(request.error(), kExitUsage);
  jobs::protocol::JobRequest& job = *request;
  json body = {{"peer", a.peer}, {"job", job.to_json()}};
  if (!a.name.empty()) body["name"] = a.name;
  std::optional<MeshLease> lease;  // --mesh: the devices booked on the chosen provider
  std::optional<MeshNeeds> mesh_needs;  // --mesh --retries: a mesh job the daemon supervises
  if (a.retries && (!a.mesh || *a.retries < 0)) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--retries N (0 or more) goes with --mesh"), kExitUsage);
  }
  if (a.replicas && (!a.mesh || *a.replicas < 1 || *a.replicas > 9)) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--replicas K (1 to 9) goes with --mesh"), kExitUsage);
  }
  if (a.validator && !a.replicas) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--validator judges replicas: add --replicas K"), kExitUsage);
  }
  bool arrayed = a.array || !a.array_file.empty();  // an array of tasks (cli/array_commands.h)
  if (arrayed && !a.mesh) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--array and --array-file spread tasks over the mesh: add --mesh"),
                       kExitUsage);
  }
  if (arrayed && (!a.ports.empty() || a.tty)) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--array does not go with -p or -t"), kExitUsage);
  }
  if (a.per_task_gpus && !arrayed) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--per-task-gpus goes with --array"), kExitUsage);
  }
  bool supervised = a.retries || a.replicas || arrayed;  // a mesh job (cli/mesh_job_commands.h)
  if (a.mesh) {
    if (a.gpus && *a.gpus < 1) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "--mesh places GPU jobs: --gpus must be 1 or more"),
                         kExitUsage);
    }
    if (job.share_permille > 0) {
      return print_error(make_error(ErrorCode::kInvalidArgument,
                                    "--mesh places whole GPUs: a share of one (--gpus 0.N) goes to one provider, "
                                    "with --on PEER"),
                         kExitUsage);
    }
    // On the mesh, --vram is the memory each GPU must have (as with --gpus N).
    if (job.share_vram_mib > 0) std::swap(job.vram_mib, job.share_vram_mib);
    MeshNeeds needs;
    needs.gpus = a.per_task_gpus.value_or(static_cast<int>(a.gpus.value_or(1)));
    job.gpus = needs.gpus;
    needs.vram_bytes = static_cast<uint64_t>(job.vram_mib) << 20;
    needs.cuda = a.cuda;
    needs.labels = a.labels;
    needs.group = a.group;
    if (supervised) {
      mesh_needs = needs;  // a mesh job: the daemon places it (below)
    } else {
      auto got = mesh_lease(ctx, needs);
      if (!got) {
        if (no_daemon(got.error())) return report_daemon_error(ctx, got.error());
        int code = got.error().code() == ErrorCode::kInvalidArgument ? kExitUsage : kExitCouldNotRun;
        return print_error(Error(got.error()).with_context("--mesh"), code);
      }
      lease = *got;
      body = {{"peer", lease->provider_id}, {"job", job.to_json()}};
    }
  }
  std::string home_dir;  // where the outputs come home to
  if (!a.no_upload && !a.upload_dir.empty()) {
    std::error_code ec;
    auto dir = std::filesystem::canonical(a.upload_dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "--upload " + a.upload_dir + " is not a folder"), kExitUsage);
    }
    body["dir"] = dir.string();
    home_dir = dir.string();
  } else if (!a.no_upload || !a.out.empty()) {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    if (ec) return print_error(make_error(ErrorCode::kFailedPrecondition, "cannot read the working directory"), kExitCouldNotRun);
    if (!a.no_upload) body["dir"] = cwd.string();
    home_dir = cwd.string();
  }
  if (mesh_needs) {
    auto needs_body = mesh_lease_body(*mesh_needs);
    if (!needs_body) return print_error(Error(needs_body.error()).with_context("--mesh"), kExitUsage);
    if (arrayed) {
      ArrayArgs arr;
      arr.job = job;
      arr.needs = *needs_body;
      arr.dir = body.value("dir", "");
      std::error_code ec;
      arr.out = home_dir.empty() ? std::filesystem::current_path(ec).string() : home_dir;
      arr.range = a.array;
      arr.file = a.array_file;
      arr.retries = a.retries.value_or(0);
      arr.replicas = a.replicas.value_or(1);
      arr.validator = a.validator.value_or("");
      arr.detach = a.detach;
      arr.no_outputs_limit = a.no_outputs_limit;
      return run_array(ctx, arr);
    }
    MeshJobArgs m;
    m.job = job;
    m.needs = *needs_body;
    m.dir = body.value("dir", "");
    m.home_dir = home_dir;
    m.out = a.out;
    m.no_outputs_limit = a.no_outputs_limit;
    m.retries = a.retries.value_or(0);
    m.replicas = a.replicas.value_or(1);
    m.validator = a.validator.value_or("");
    m.detach = a.detach;
    return run_mesh_job(ctx, m);
  }
  std::string transfer_id = new_transfer_id();
  body["transfer_id"] = transfer_id;
  // Ctrl-C (or SIGTERM) while the folder uploads or the job is submitted:
  // the daemon cancels, and if the job was already submitted it stops it.
  auto installed = SignalPipe::install();
  std::unique_ptr<SignalPipe> signals = installed ? std::move(*installed) : nullptr;
  int sig_fd = signals ? signals->fd() : -1;
  auto submitted = with_transfer_progress(
      ctx, transfer_id, [&] { return api(ctx, "POST", "/v1/jobs", body, std::chrono::minutes(30), sig_fd); });
  if (lease) {  // the job holds the devices now, or never will
    if (submitted && !submitted->value("job_id", "").empty()) {
      mesh_bind(ctx, *lease, submitted->value("job_id", ""));
    } else {
      mesh_release(ctx, *lease);
    }
  }
  if (signals && signals->take() != 0) return cancel_submit(ctx, transfer_id);
  signals.reset();  // attach_to_job catches signals its own way
  if (!submitted) {
    if (no_daemon(submitted.error())) return report_daemon_error(ctx, submitted.error());
    return print_error(Error(submitted.error()).with_context("the job could not run"), kExitCouldNotRun);
  }
  std::string id = submitted->value("job_id", "");
  // What the provider says its jobs run without (a Slurm cluster: no
  // container, no image, the cluster's network): said at every submit.
  if (submitted->contains("notice") && (*submitted)["notice"].is_string() && !ctx.json) {
    std::fprintf(stderr, "yonder: the provider says: %s\n", terminal_safe((*submitted)["notice"].get<std::string>()).c_str());
  }
  // A job past the provider's or the scope's jobs at once waits its turn:
  // said now, so an attached run that prints nothing yet is not a mystery.
  std::string state = submitted->value("state", "");
  if ((state == "pending" || state == "queued") && submitted->contains("waiting_for") &&
      (*submitted)["waiting_for"].is_string()) {
    std::fprintf(stderr, "yonder: job %s is pending: %s\n", short_id(id).c_str(),
                 terminal_safe((*submitted)["waiting_for"].get<std::string>()).c_str());
  }
  if (a.detach) {
    if (ctx.json) {
      std::printf("%s\n", submitted->dump(2).c_str());
    } else {
      std::printf("%s\n", id.c_str());
    }
    return kExitOk;
  }
  if (isatty(STDERR_FILENO)) {
    const json& up = (*submitted)["upload"];
    std::string sent;
    if (up.is_object()) {
      uint64_t files = up.value("files", uint64_t{0}), sent_files = up.value("sent_files", files);
      sent = ", workspace " + std::to_string(files) + " file(s), " + format_size(up.value("bytes", uint64_t{0})) + ": sent " +
             std::to_string(sent_files) + " (" + format_size(up.value("sent_bytes", uint64_t{0})) + ")";
      if (sent_files < files) sent += ", " + std::to_string(files - sent_files) + " unchanged";
    }
    std::fprintf(stderr, "yonder: job %s on %s%s\n", short_id(id).c_str(),
                 shown(*submitted, "provider_name", a.peer).c_str(), sent.c_str());
  }
  if (const json& up = (*submitted)["upload"]; up.is_object()) {
    std::string skipped = skipped_line(up);
    if (!skipped.empty()) std::fprintf(stderr, "yonder: upload: %s\n", skipped.c_str());
  }
  auto attached = attach(ctx, id, a);
  if (!attached) return fail(ctx, attached.error());
  if (attached->detached) return kExitOk;
  auto view = api(ctx, "GET", "/v1/jobs/inspect?id=" + id);
  if (!view) return fail(ctx, view.error());
  const json& code = (*view)["exit_code"];
  bool fetch_failed = false;
  if (code.is_number_integer() && !home_dir.empty()) {
    auto got = fetch_files(ctx, id, home_dir, a.out, a.no_outputs_limit);
    if (!got && ask_past_outputs_budget(got.error())) got = fetch_files(ctx, id, home_dir, a.out, true);
    if (!got) {
      std::fprintf(stderr, "yonder: could not bring the job's files home: %s\n", got.error().message().c_str());
      fetch_failed = true;
    } else {
      report_fetched(*got);
    }
  }
  if (code.is_number_integer()) {
    if (view->value("state", "") == "stopped") {
      std::fprintf(stderr, "yonder: job %s was stopped: %s\n", short_id(id).c_str(), view->value("message", "").c_str());
    }
    if (view->value("oom_killed", false)) std::fprintf(stderr, "yonder: job %s ran out of memory\n", short_id(id).c_str());
    if (view->contains("log_lost")) {
      std::fprintf(stderr, "yonder: job %s: %s\n", short_id(id).c_str(), view->value("log_lost", "").c_str());
    }
    // Stopped because of our Ctrl-C or SIGTERM: the shell's code for that
    // signal (130, 143), as if the job had been killed by it here.
    if (attached->stopped_by != 0 && view->value("state", "") == "stopped") return 128 + attached->stopped_by;
    // The job's own failure wins; a job that succeeded but whose files did
    // not come home is still a failure of the command.
    if (code.get<int>() == 0 && fetch_failed) return kExitError;
    return code.get<int>();
  }
  std::fprintf(stderr, "yonder: job %s %s without running to an end: %s\n", short_id(id).c_str(),
               view->value("state", "ended").c_str(), view->value("message", "").c_str());
  if (attached->stopped_by != 0 && view->value("state", "") == "stopped") return 128 + attached->stopped_by;
  return kExitCouldNotRun;
}

int cmd_logs(const Context& ctx, const std::string& job, const LogsArgs& args) {
  LogsOptions options;
  options.follow = args.follow;
  options.raw = args.raw;
  options.timestamps = args.timestamps;
  if (!args.since.empty()) {
    auto s = parse_since(args.since);
    if (!s) return print_error(s.error(), kExitUsage);
    options.since_ns = *s;
  }
  if (!args.tail.empty()) {
    auto t = parse_tail(args.tail);
    if (!t) return print_error(t.error(), kExitUsage);
    options.tail = *t;
  }
  auto r = print_logs(ctx, job, options);
  if (!r) return fail(ctx, r.error());
  if (!args.follow || !*r) return kExitOk;
  // Followed to the end: exit as the job did, as `wait` does.
  auto view = api(ctx, "GET", "/v1/jobs/inspect?id=" + job);
  if (!view) return fail(ctx, view.error());
  return exit_code_of_ended(*view);
}

int cmd_stop(const Context& ctx, const std::string& job) {
  auto r = api(ctx, "POST", "/v1/jobs/stop", {{"job_id", job}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("%s %s\n", r->value("job_id", job).c_str(), r->value("stopping", r->value("state", "")).c_str());
  }
  return kExitOk;
}

int cmd_hold(const Context& ctx, const std::vector<std::string>& jobs, bool held) {
  int code = kExitOk;
  for (const auto& job : jobs) {
    auto r = api(ctx, "POST", held ? "/v1/jobs/hold" : "/v1/jobs/release", {{"job_id", job}});
    if (!r) {
      code = fail(ctx, r.error());
      continue;
    }
    if (ctx.json) {
      std::printf("%s\n", r->dump().c_str());
    } else {
      std::printf("%s %s\n", r->value("job_id", job).c_str(), held ? "held" : "released");
    }
  }
  return code;
}

namespace {

// "JOB:PATH" names a place in a job's workspace; anything else (a path with
// a '/' before its first ':', or no ':') is local, as with `docker cp`.
bool is_job_path(const std::string& arg) {
  size_t colon = arg.find(':');
  return colon != std::string::npos && colon > 0 && arg.find('/') > colon;
}

// A private folder (0700) for a copy on its way, removed with what is
// left in it.
class StagingFolder {
 public:
  static Result<StagingFolder> make(const std::string& in) {
    std::string tmpl = in + "/.yonder-cp-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return make_error(ErrorCode::kUnavailable, "cannot make a folder in " + in + " for the copy: " +
                                                     std::strerror(errno) + "; check that it is writable");
    }
    return StagingFolder(tmpl);
  }
  StagingFolder(StagingFolder&& o) noexcept : path_(std::exchange(o.path_, "")) {}
  StagingFolder& operator=(StagingFolder&&) = delete;
  ~StagingFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit StagingFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Copies everything `from` holds until its end to `to`, through short
// writes and EINTR; false (errno set) when a read or write failed.
bool copy_all(int from, int to) {
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(from, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(to, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += w;
    }
  }
}

std::string temp_root() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t == '/' ? t : "/tmp";
}

// `cp JOB:PATH FILE` and `cp JOB:PATH -`: PATH must be one file. It comes
// home through the same fetch as every copy (links never followed, names
// checked) into a staging folder beside FILE, then takes FILE's name in one
// rename, or is written to standard output.
int cp_one_file_out(const Context& ctx, const std::string& job, const std::string& path, const std::string& file) {
  if (path.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "the whole workspace is a folder: copy it into a folder (yonder cp JOB: DIR)"),
                       kExitUsage);
  }
  std::error_code ec;
  std::string beside = file.empty() ? temp_root() : std::filesystem::absolute(file, ec).parent_path().string();
  auto staging = StagingFolder::make(beside);
  if (!staging) return fail(ctx, staging.error());
  auto got = fetch_files(ctx, job, staging->path(), {path}, true);
  if (!got) return fail(ctx, got.error());
  const json& files = (*got)["files"];
  if (files.size() != 1 || !files[0].is_string() || files[0].get<std::string>() != path) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  path + " is a folder in the job (" + std::to_string(files.size()) +
                                      " file(s)), not a file: copy it into a folder (yonder cp " + job + ":" + path +
                                      " DIR)"),
                       kExitUsage);
  }
  std::string fetched = staging->path() + "/" + path;
  if (!file.empty()) {
    if (::rename(fetched.c_str(), file.c_str()) != 0) {
      return fail(ctx, make_error(ErrorCode::kUnavailable, "cannot write " + file + ": " + std::strerror(errno)));
    }
    if (ctx.json) {
      std::printf("%s\n", json({{"file", file}, {"from", path}}).dump(2).c_str());
    } else {
      std::printf("%s\n", shown(file).c_str());
    }
    return kExitOk;
  }
  int fd = ::open(fetched.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fail(ctx, make_error(ErrorCode::kUnavailable, "cannot read the copy: " + std::string(std::strerror(errno))));
  std::fflush(stdout);
  bool ok = copy_all(fd, STDOUT_FILENO);
  ::close(fd);
  if (!ok) return fail(ctx, make_error(ErrorCode::kUnavailable, "writing the file to standard output failed: " + std::string(std::strerror(errno))));
  return kExitOk;
}

// `cp LOCAL JOB:PATH`: LOCAL (a file or folder) goes into the workspace
// folder PATH under its own name. `cp - JOB:PATH`: standard input becomes
// the file PATH (docker reads a tar there; one file is what a pipe holds).
// The daemon reads what it sends: give it a real path.
int cp_into_job(const Context& ctx, const std::string& from, const std::string& to) {
  size_t colon = to.find(':');
  std::string job = to.substr(0, colon);
  auto dir = workspace_relative(to.substr(colon + 1));
  if (!dir) return print_error(dir.error(), kExitUsage);
  std::optional<StagingFolder> staging;
  std::filesystem::path src;
  if (from == "-") {
    std::filesystem::path named(*dir);
    if (dir->empty() || named.filename().empty()) {
      return print_error(make_error(ErrorCode::kInvalidArgument,
                                    "cp - JOB:PATH writes standard input to the file PATH: name it (e.g. " + job +
                                        ":inputs/data.csv)"),
                         kExitUsage);
    }
    auto made = StagingFolder::make(temp_root());
    if (!made) return fail(ctx, made.error());
    staging.emplace(std::move(*made));
    src = staging->path() + "/" + named.filename().string();
    int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail(ctx, make_error(ErrorCode::kUnavailable, "cannot stage standard input: " + std::string(std::strerror(errno))));
    bool ok = copy_all(STDIN_FILENO, fd);
    if (::close(fd) != 0) ok = false;
    if (!ok) return fail(ctx, make_error(ErrorCode::kUnavailable, "reading standard input failed: " + std::string(std::strerror(errno))));
    *dir = named.parent_path().string();
  } else {
    std::error_code ec;
    src = std::filesystem::canonical(from, ec);
    if (ec) return print_error(make_error(ErrorCode::kInvalidArgument, from + " does not exist"), kExitUsage);
  }
  auto r = api(ctx, "POST", "/v1/jobs/put", {{"job_id", job}, {"src", src.string()}, {"dir", dir->empty() ? "." : *dir}},
               std::chrono::minutes(30));
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    for (const auto& f : (*r)["paths"]) std::printf("%s\n", f.get<std::string>().c_str());
  }
  return kExitOk;
}

}  // namespace

int cmd_cp(const Context& ctx, const std::string& from, const std::string& to, bool dry_run) {
  bool out = is_job_path(from), in = !to.empty() && is_job_path(to);
  if (out == in) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "cp copies out of a job (yonder cp JOB:PATH [LOCAL|-]) or into a running one (yonder "
                                  "cp LOCAL|- JOB:PATH); exactly one side is JOB:PATH"),
                       kExitUsage);
  }
  if (in && dry_run) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--dry-run previews files coming out of a job (yonder cp --dry-run JOB:PATH [LOCAL])"),
                       kExitUsage);
  }
  if (in) return cp_into_job(ctx, from, to);
  size_t colon = from.find(':');
  std::string job = from.substr(0, colon);
  auto path = workspace_relative(from.substr(colon + 1));
  if (!path) return print_error(path.error(), kExitUsage);
  auto target = cp_out_target(to);
  if (!target) return print_error(target.error(), kExitUsage);
  if (*target != CpOut::kIntoFolder) {
    if (dry_run) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "--dry-run previews a copy into a folder (yonder cp "
                                                                 "--dry-run JOB:PATH [DIR])"),
                         kExitUsage);
    }
    return cp_one_file_out(ctx, job, *path, *target == CpOut::kToStdout ? "" : to);
  }
  std::error_code ec;
  auto dir = std::filesystem::absolute(to.empty() ? std::string(".") : to, ec);
  auto got = fetch_files(ctx, job, dir.lexically_normal().string(), {path->empty() ? "." : *path}, false, dry_run);
  if (!got) return fail(ctx, got.error());
  if (ctx.json) {
    std::printf("%s\n", got->dump(2).c_str());
  } else if (dry_run) {
    // What the copy would do, written nowhere: each file, marked where it
    // would replace one here, and what the outputs policy would leave out.
    std::set<std::string> replaced;
    for (const auto& f : (*got)["replaced"]) replaced.insert(f.get<std::string>());
    for (const auto& f : (*got)["files"]) {
      std::string rel = f.get<std::string>();
      std::printf("%s  %s\n", replaced.count(rel) ? "replace" : "new    ", shown(rel).c_str());
    }
    std::fprintf(stderr, "yonder: dry run: %zu file(s) would come home, %zu of them replacing a file here; nothing "
                         "was written\n", (*got)["files"].size(), replaced.size());
    if (got->contains("left_out_why")) std::fprintf(stderr, "yonder: %s\n", shown(*got, "left_out_why", "").c_str());
    std::string skipped = skipped_line(*got);
    if (!skipped.empty()) std::fprintf(stderr, "yonder: %s\n", skipped.c_str());
  } else {
    for (const auto& f : (*got)["files"]) std::printf("%s\n", shown(f.get<std::string>()).c_str());
    std::string skipped = skipped_line(*got);
    if (!skipped.empty()) std::fprintf(stderr, "yonder: %s\n", skipped.c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
