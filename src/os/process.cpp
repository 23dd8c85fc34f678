#include "os/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace yonder::os {

Result<ProcessOutput> run_capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                  size_t max_output) {
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "no program to run");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return make_error(ErrorCode::kInternal, "pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // Nothing else crosses into the child: Asio opens its sockets without
  // close-on-exec, so a child would otherwise hold the daemon's listening
  // ports and peer connections (and keep a port busy after a crash).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return make_error(ErrorCode::kNotFound, "cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  ProcessOutput out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.output.size() < max_output) {
      out.output.append(buf, std::min(static_cast<size_t>(n), max_output - out.output.size()));
    }
  }
  ::close(pipe_fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = (!timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string private_lib_path(const std::string& name) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (exe.parent_path().parent_path() / "lib" / "yonder" / name).string();
}

Result<int> spawn_with_fd(const std::vector<std::string>& argv, const std::vector<std::string>& env, int fd) {
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "no program to run");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fd, 3);  // dup2 clears close-on-exec
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  std::vector<std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& extra : env) replaced |= extra.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced) merged.push_back(std::move(entry));
  }
  merged.insert(merged.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : merged) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return make_error(ErrorCode::kNotFound, "cannot run " + argv[0] + ": " + std::strerror(rc));
  return static_cast<int>(pid);
}

}  // namespace yonder::os
