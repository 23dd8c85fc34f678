// The executor interface: where a job's process actually runs. Modelled on
// Nomad's task drivers (plugins/drivers): a backend says what it can offer
// (fingerprint), starts a task and returns a serialisable handle that the
// caller persists before acknowledging the job, re-attaches to it after a
// daemon restart (recover), and waits, stops, signals, inspects, execs into
// and reads the logs of it. The Docker backend (docker/) is the first; a
// Slurm backend will implement the same calls with sbatch/squeue/scancel/
// sacct, which is why nothing here names a container.
//
// Threading: every call may block (it talks to a daemon or runs a program),
// so the node's event loop never calls an Executor directly: it posts the
// work to a worker thread. Implementations are safe to call from several
// threads at once. wait(), logs(follow) and exec streams block for as long
// as the task runs; cancel them through the Cancel token they are given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace yonder::exec {

// What a backend can run, for `yonder doctor`, the status route and the
// submit-time checks (a GPU job on an engine without GPU support fails here,
// before anything is created).
struct Fingerprint {
  std::string backend;        // "docker" or "slurm"
  bool healthy = false;       // the engine answered
  std::string engine;         // "docker" or "podman"
  std::string version;        // engine version text
  std::vector<std::string> runtimes;  // OCI runtimes the engine has registered ("runc", "runsc", "nvidia")
  bool gpu_capable = false;   // GPUs can be passed through (NVIDIA runtime / hook present, not Podman)
  std::string gpu_detail;     // when !gpu_capable: the missing piece and how to add it
  std::string detail;         // when !healthy: why, and what to do
};

// Resource limits of one task. Sizes in bytes, times in seconds.
struct Limits {
  int64_t nano_cpus = 1'000'000'000;      // 1e9 = one CPU
  int64_t memory_bytes = 2LL << 30;       // RAM; swap is not granted (Memory = MemorySwap)
  int64_t pids = 512;
  int64_t shm_bytes = 64LL << 20;         // /dev/shm
  int64_t tmp_bytes = 256LL << 20;        // tmpfs /tmp, counted against memory_bytes
  int64_t disk_bytes = 10LL << 30;        // the workspace file system
  int64_t log_file_bytes = 10LL << 20;    // engine-side log cap per file (two files kept)
  // Wall-time limit the backend itself enforces where it can (Slurm's
  // --time); 0: none. The job manager's watchdog enforces it either way.
  int64_t wall_time_s = 0;
};

enum class Isolation { kStandard, kGvisor };
const char* isolation_name(Isolation i);

struct TaskSpec {
  std::string job_id;           // the provider's id; labels the task
  std::string image;            // already checked against the image policy
  std::vector<std::string> command;   // argv; empty runs the image's default
  std::map<std::string, std::string> env;  // already filtered (exec/env_filter.h)
  // Where the command starts. Under the workspace, start() creates it
  // (owned by the job's user) when the upload did not: Docker would make it
  // owned by root, so the job could not write there.
  std::string workdir = "/workspace";
  // The task's process gets a terminal (isatty is true); its output is then
  // one stream, delivered as kStdout, with the terminal's \r\n line ends.
  bool tty = false;
  // A host folder whose contents start() copies into a new workspace
  // (owned by the job's user) before the task starts: the consumer's
  // uploaded files. Empty: the workspace starts empty.
  std::string seed_dir;
  Limits limits;
  std::vector<std::string> gpu_uuids;  // leased devices; empty for a CPU job
  // Tests on machines without GPUs only: lease fake devices but pass no
  // device request to the engine (the task sees the UUIDs in its
  // environment only). Never set with a real inventory.
  bool simulate_gpus = false;
  // > 0: a share of its one device (gpu_uuids), with this much VRAM. The
  // backend preloads the VRAM guard (src/gpu/vram_guard) into the task with
  // a ledger holding this budget, or refuses the task if it cannot.
  uint64_t vram_budget_bytes = 0;
  bool network_egress = false;  // false: no network at all
  Isolation isolation = Isolation::kStandard;
};

// Everything needed to find the task again after a restart. Serialised into
// the jobs table (handle_json) before the job is acknowledged.
struct TaskHandle {
  std::string backend;       // "docker"
  std::string job_id;
  std::string task_id;       // container id (docker), job id (slurm)
  std::string workspace;     // host path of the workspace mount, "" if none
  std::string workspace_image;  // backing image file, "" if none
  std::string image_id;         // the engine's id of the image the task runs (sha256:...), "" if unknown

  nlohmann::json to_json() const;
  static Result<TaskHandle> from_json(const nlohmann::json& json);
};

enum class TaskState { kCreated, kRunning, kExited, kMissing };
const char* task_state_name(TaskState s);

struct ExitInfo {
  int exit_code = -1;
  bool oom_killed = false;   // Docker's OOMKilled flag: the exit code alone does not say it
  std::string error;         // the engine's own error text, if it gave one
  // Why the backend ended the task when it was not the task's own exit:
  // "time_limit", "cancelled_by_cluster", "node_failure", "out_of_memory",
  // "preempted", "refused" (a cluster backend's verdicts); "" otherwise.
  std::string cause;
};

struct TaskStatus {
  TaskState state = TaskState::kMissing;
  int pid = 0;               // host pid of the task's first process, 0 when not running
  ExitInfo exit;             // valid when state == kExited
};

struct TaskStats {
  uint64_t memory_bytes = 0;
  uint64_t cpu_total_ns = 0;
  uint64_t pids = 0;
};

// A task found on the backend carrying our owner label; the reconciler
// compares these with the persisted jobs.
struct OwnedTask {
  std::string job_id;
  std::string task_id;
  bool running = false;
  TaskHandle handle;  // as start() would have returned it
};

// Lets another thread abort a blocking wait/logs/exec call.
class Cancel {
 public:
  virtual ~Cancel() = default;
  virtual void cancel() = 0;
};
using CancelSlot = std::function<void(std::shared_ptr<Cancel>)>;

enum class LogStream : uint8_t { kStdin = 0, kStdout = 1, kStderr = 2, kSystem = 3 };

struct LogOptions {
  bool follow = false;
  // Only entries after this time (unix nanoseconds), 0 for all. Used to
  // resume a log pump after a restart without duplicating entries.
  int64_t since_unix_ns = 0;
};
// Receives each entry: stream, its time (unix ns) and bytes. Return false to stop.
using LogSink = std::function<bool(LogStream, int64_t unix_ns, std::string_view)>;

struct ExecSpec {
  std::vector<std::string> command;
  bool tty = false;
  int rows = 24;
  int cols = 80;
};

// A process started inside a running task. read() returns raw TTY bytes
// (stream kStdout) with a TTY, or demultiplexed stdout/stderr without.
class ExecSession {
 public:
  virtual ~ExecSession() = default;
  virtual Status write(std::string_view bytes) = 0;
  virtual void close_stdin() = 0;
  // Blocks until bytes arrive (or timeout). nullopt at end of stream.
  virtual Result<std::optional<std::pair<LogStream, std::string>>> read(std::chrono::milliseconds timeout) = 0;
  virtual Status resize(int rows, int cols) = 0;
  // Thread-safe: wakes a blocked read() or write(), which then fail, so a
  // reader thread can be stopped (the process itself is not signalled).
  virtual void cancel() = 0;
  // The exit code once the process has ended.
  virtual Result<int> exit_code() = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual Fingerprint fingerprint() = 0;
  // Checks the spec against what the backend can do (no side effects); the
  // error names the missing piece. start() calls it too.
  virtual Status check(const TaskSpec& spec) = 0;
  // Creates and starts the task. On failure nothing is left behind.
  virtual Result<TaskHandle> start(const TaskSpec& spec) = 0;
  // Re-attaches to a task from a persisted handle (after a restart); the
  // status tells whether it still runs.
  virtual Result<TaskStatus> recover(const TaskHandle& handle) = 0;
  // Blocks until the task ends. `on_cancel` receives a token that aborts it.
  virtual Result<ExitInfo> wait(const TaskHandle& handle, const CancelSlot& on_cancel) = 0;
  // Sends `signal`, waits up to `grace` for the task to end, then kills it.
  virtual Status stop(const TaskHandle& handle, int signal, std::chrono::seconds grace) = 0;
  virtual Status signal(const TaskHandle& handle, int signal) = 0;
  // Removes the task and everything start() made for it (workspace included
  // when `remove_workspace`). Idempotent: a missing task is not an error.
  virtual Status destroy(const TaskHandle& handle, bool remove_workspace) = 0;
  virtual Result<TaskStatus> inspect(const TaskHandle& handle) = 0;
  virtual Result<TaskStats> stats(const TaskHandle& handle) = 0;
  virtual Result<std::unique_ptr<ExecSession>> exec(const TaskHandle& handle, const ExecSpec& spec) = 0;
  // Delivers log entries to `sink` in order; with follow, until the task
  // ends, the sink returns false or the call is cancelled.
  virtual Status logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
                      const CancelSlot& on_cancel) = 0;
  // Tasks carrying this executor's owner label (for the reconciler).
  virtual Result<std::vector<OwnedTask>> list_owned() = 0;
  // Removes an owned task nobody claims, by task id.
  virtual Status remove_task(const std::string& task_id) = 0;
  // True when host process `pid` belongs to the task (for per-process GPU
  // accounting, which NVML reports by host pid).
  virtual bool owns_pid(const TaskHandle& handle, int pid) = 0;
};

}  // namespace yonder::exec
