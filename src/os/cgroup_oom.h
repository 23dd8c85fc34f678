// Watching a container's memory cgroup for out-of-memory kills, for engines
// that do not report them (Podman 4.3's State.OOMKilled stays false).
//
// The kernel counts kills per cgroup (cgroup v2: `oom_kill` in memory.events;
// v1: `oom_kill` in memory.oom_control, kernel 4.13+), but the engine removes
// the container's cgroup as soon as the container exits, before anyone can
// read the count. So the watch is armed while the cgroup exists (before the
// task starts) and a thread wakes on the kernel's own notification (v2:
// inotify on memory.events; v1: an eventfd registered for
// memory.oom_control) and reads the counter while the cgroup is still there.
// The thread ends when the cgroup goes away or the watch is destroyed.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/error.h"

namespace yonder::os {

// Where a process's memory cgroup keeps its OOM counter.
struct OomCounterFile {
  bool v2 = false;
  std::string dir;   // the cgroup's folder
  std::string file;  // dir + "/memory.events" (v2) or "/memory.oom_control" (v1)
};

// Pure: from the text of /proc/<pid>/cgroup and the cgroup file system root
// ("/sys/fs/cgroup"), the counter file. A v1 `memory` line wins (hybrid
// hosts keep memory there); otherwise the v2 "0::" line. kNotFound when the
// process has no memory cgroup.
Result<OomCounterFile> oom_counter_file(std::string_view proc_cgroup, const std::string& root);

// Pure: the `oom_kill` count in the text of memory.events or
// memory.oom_control; -1 when the line is missing.
int64_t parse_oom_kill_count(std::string_view text);

// Thread-safe. Destroying it stops and joins its thread.
class OomWatch {
 public:
  ~OomWatch();
  OomWatch(const OomWatch&) = delete;
  OomWatch& operator=(const OomWatch&) = delete;

  // Arms a watch on the memory cgroup of host process `pid` (the task's
  // first process; the task must not have started its work yet, or a kill
  // before the watch is missed). kNotFound: no memory cgroup (the process
  // is gone); kUnavailable: the kernel refused the notification.
  static Result<std::unique_ptr<OomWatch>> arm(int pid, const std::string& cgroup_root = "/sys/fs/cgroup");

  // True once the kernel has killed a process in the cgroup for memory, or
  // (v1) reported the cgroup out of memory while it still existed.
  bool oom_killed();

 private:
  OomWatch() = default;
  void run();
  void check(bool notified);

  OomCounterFile file_;
  int notify_fd_ = -1;   // inotify (v2) or eventfd (v1)
  int control_fd_ = -1;  // v1: the open memory.oom_control the eventfd is registered for
  int stop_fd_ = -1;     // eventfd that ends the thread
  std::atomic<bool> killed_{false};
  std::thread thread_;
};

}  // namespace yonder::os
