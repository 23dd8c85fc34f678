#include "os/netns.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

namespace yonder::os {

Result<int> open_netns_of(int pid, const std::function<bool()>& still_ours) {
  if (pid <= 0) return make_error(ErrorCode::kFailedPrecondition, "the job has no running process");
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return make_error(ErrorCode::kFailedPrecondition, "the job's process is gone");
  if (still_ours && !still_ours()) {
    ::close(pidfd);
    return make_error(ErrorCode::kFailedPrecondition, "the job's process changed");
  }
  std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  int ns = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int err = errno;
  // Still alive after the open: the namespace is that process's, not a
  // newcomer's that took over the pid.
  bool alive = ::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0;
  ::close(pidfd);
  if (ns < 0) {
    return make_error(err == EACCES || err == EPERM ? ErrorCode::kPermissionDenied : ErrorCode::kFailedPrecondition,
                      "cannot open " + path + ": " + std::strerror(err));
  }
  if (!alive) {
    ::close(ns);
    return make_error(ErrorCode::kFailedPrecondition, "the job's process ended");
  }
  return ns;
}

Result<int> connect_loopback_in_netns(int netns_fd, uint16_t port) {
  Result<int> out = make_error(ErrorCode::kInternal, "not run");
  // A thread of its own: it leaves the daemon's namespace and ends there.
  std::thread t([&] {
    if (::unshare(CLONE_FS) != 0 || ::setns(netns_fd, CLONE_NEWNET) != 0) {
      int e = errno;
      out = make_error(e == EPERM ? ErrorCode::kPermissionDenied : ErrorCode::kInternal,
                       std::string("cannot enter the job's network namespace: ") + std::strerror(e));
      return;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      out = make_error(ErrorCode::kInternal, std::string("socket: ") + std::strerror(errno));
      return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int e = errno;
      ::close(fd);
      out = make_error(e == ECONNREFUSED ? ErrorCode::kUnavailable : ErrorCode::kInternal,
                       "nothing accepts connections on port " + std::to_string(port) + " inside the job (" +
                           std::strerror(e) + ")");
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    out = fd;
  });
  t.join();
  return out;
}

}  // namespace yonder::os
