#include "os/cgroup_oom.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "os/proc_files.h"

namespace yonder::os {
namespace {

constexpr size_t kMaxCounterFile = 16 * 1024;

std::string_view trim_line(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<OomCounterFile> oom_counter_file(std::string_view proc_cgroup, const std::string& root) {
  std::string v2_path;
  bool have_v2 = false;
  while (!proc_cgroup.empty()) {
    size_t nl = proc_cgroup.find('\n');
    std::string_view line = trim_line(proc_cgroup.substr(0, nl));
    proc_cgroup.remove_prefix(nl == std::string_view::npos ? proc_cgroup.size() : nl + 1);
    // "hierarchy-id:controller-list:path"; the path may itself hold ':'.
    size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::string_view controllers = line.substr(a + 1, b - a - 1);
    std::string_view path = line.substr(b + 1);
    if (path.empty() || path.front() != '/' || path.find("/../") != std::string_view::npos) continue;
    if (line.substr(0, a) == "0" && controllers.empty()) {
      have_v2 = true;
      v2_path = std::string(path);
      continue;
    }
    size_t at = 0;
    while (at <= controllers.size()) {
      size_t comma = controllers.find(',', at);
      std::string_view c = controllers.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
      if (c == "memory") {
        std::string dir = root + "/memory" + (path == "/" ? "" : std::string(path));
        return OomCounterFile{false, dir, dir + "/memory.oom_control"};
      }
      if (comma == std::string_view::npos) break;
      at = comma + 1;
    }
  }
  if (!have_v2) return make_error(ErrorCode::kNotFound, "the process has no memory cgroup");
  std::string dir = root + (v2_path == "/" ? "" : v2_path);
  return OomCounterFile{true, dir, dir + "/memory.events"};
}

int64_t parse_oom_kill_count(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim_line(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    constexpr std::string_view kKey = "oom_kill ";
    if (line.substr(0, kKey.size()) != kKey) continue;
    int64_t n = 0;
    std::string_view digits = line.substr(kKey.size());
    if (digits.empty() || digits.size() > 18) return -1;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return -1;
      n = n * 10 + (ch - '0');
    }
    return n;
  }
  return -1;
}

Result<std::unique_ptr<OomWatch>> OomWatch::arm(int pid, const std::string& cgroup_root) {
  auto text = read_small_file("/proc/" + std::to_string(pid) + "/cgroup", 64 * 1024);
  if (!text) return std::move(text).error().with_context("finding the memory cgroup of process " + std::to_string(pid));
  auto file = oom_counter_file(*text, cgroup_root);
  if (!file) return std::move(file).error();
  std::unique_ptr<OomWatch> w(new OomWatch());
  w->file_ = *file;
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCode::kUnavailable, what + " " + w->file_.file + ": " + std::strerror(errno) +
                                                   "; out-of-memory kills of this task will not be reported");
  };
  w->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->stop_fd_ < 0) return fail("cannot make an eventfd to watch");
  if (w->file_.v2) {
    w->notify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (w->notify_fd_ < 0) return fail("cannot start inotify for");
    if (::inotify_add_watch(w->notify_fd_, w->file_.file.c_str(), IN_MODIFY) < 0) return fail("cannot watch");
  } else {
    // cgroup v1's notification API: write "<eventfd> <fd of memory.oom_control>"
    // to cgroup.event_control; the kernel signals the eventfd when the
    // cgroup runs out of memory (and once more when it is removed).
    w->notify_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->notify_fd_ < 0) return fail("cannot make an eventfd for");
    w->control_fd_ = ::open(w->file_.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (w->control_fd_ < 0) return fail("cannot open");
    std::string line = std::to_string(w->notify_fd_) + " " + std::to_string(w->control_fd_);
    int ec = ::open((w->file_.dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC);
    if (ec < 0) return fail("cannot register for notifications from");
    bool written = ::write(ec, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(ec);
    if (!written) return fail("cannot register for notifications from");
  }
  w->check(false);
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

OomWatch::~OomWatch() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  for (int fd : {notify_fd_, control_fd_, stop_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void OomWatch::check(bool notified) {
  auto text = read_small_file(file_.file, kMaxCounterFile);
  if (!text) return;  // the cgroup is gone: what was seen stands
  // v1 notifies when the cgroup is out of memory, which may be just before
  // the kill is counted; a notification while the cgroup exists is the OOM.
  if (parse_oom_kill_count(*text) > 0 || (notified && !file_.v2)) killed_ = true;
}

void OomWatch::run() {
  while (true) {
    pollfd fds[2] = {{notify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    char buf[4096];
    while (::read(notify_fd_, buf, sizeof buf) > 0) {
    }
    if (::access(file_.file.c_str(), F_OK) != 0) return;  // removed: no more notifications worth reading
    check(true);
  }
}

bool OomWatch::oom_killed() {
  check(false);  // a kill the notification has not delivered yet, while the cgroup exists
  return killed_;
}

}  // namespace yonder::os
