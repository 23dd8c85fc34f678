#include "support/live_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace yonder::testing {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

LiveProcess::LiveProcess(const std::vector<std::string>& argv_in, const Env& env, bool terminal) {
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> envv = merged_env(env);
  auto a = c_strings(argv);
  auto e = c_strings(envv);
  if (terminal) {
    int master = -1;
    winsize size{24, 80, 0, 0};
    pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
    if (pid < 0) throw std::runtime_error("forkpty failed");
    if (pid == 0) {
      ::execve(a[0], a.data(), e.data());
      ::_exit(127);
    }
    ::fcntl(master, F_SETFD, FD_CLOEXEC);
    pid_ = pid;
    in_ = master;
    out_fd_ = master;
    return;
  }
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) || ::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  int rc = ::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) throw std::runtime_error("cannot spawn " + argv[0]);
  in_ = in_pipe[1];  // kept open: the program sees a stdin that is not a terminal and never ends
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
}

LiveProcess::~LiveProcess() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (in_ >= 0) ::close(in_);
  if (out_fd_ >= 0 && out_fd_ != in_) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void LiveProcess::pump(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (::poll(fds, 2, static_cast<int>(timeout.count())) <= 0) return;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
    if (n <= 0) {  // EOF, or EIO from a terminal whose program has gone
      if (fds[i].fd != in_) ::close(fds[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
      continue;
    }
    (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    all_.append(buf, static_cast<size_t>(n));
  }
}

bool LiveProcess::wait_for(const std::string& text, std::chrono::milliseconds timeout, size_t from) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (all_.size() > from && all_.find(text, from) != std::string::npos) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || (out_fd_ < 0 && err_fd_ < 0)) return false;
    pump(std::min(left, std::chrono::milliseconds(200)));
  }
}

void LiveProcess::signal(int sig) {
  if (!exited_) ::kill(pid_, sig);
}

void LiveProcess::write(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(in_, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

int LiveProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    pump(std::chrono::milliseconds(50));
  }
  // What it wrote last.
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    size_t before = all_.size();
    pump(std::chrono::milliseconds(200));
    if (all_.size() == before) break;
  }
  return status_;
}

}  // namespace yonder::testing
