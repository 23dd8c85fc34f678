#include "support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace yonder::testing {

std::vector<std::string> merged_env(const Env& extra) {
  std::map<std::string, std::string> all;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) all[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // Tests never multicast onto the host's own network: LAN discovery is
  // off unless a test (in the NAT lab's namespaces) turns it on.
  all.emplace("YONDER_LINK_LAN_DISCOVERY", "false");
  // Nor do they ask the host's router for port mappings (NAT-PMP, SSDP).
  all.emplace("YONDER_LINK_PORT_MAPPING", "false");
  // Nor punch holes (tests that want it, in the NAT lab, turn it on).
  all.emplace("YONDER_LINK_HOLE_PUNCHING", "false");
  for (const auto& [k, v] : extra) {
    if (v.empty()) all.erase(k);
    else all[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : all) out.push_back(k + "=" + v);
  return out;
}

namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int decode_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

}  // namespace

std::string program_path(const std::string& name) {
  std::string var = "YONDER_BIN_" + name;
  for (auto& c : var) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const char* p = std::getenv(var.c_str());
  if (p == nullptr) throw std::runtime_error(var + " is not set; run this test through ctest");
  return p;
}

RunResult run(const std::vector<std::string>& argv_in, const Env& env, const std::string& input) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) || ::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC)) {
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> envv = merged_env(env);
  auto a = c_strings(argv);
  auto e = c_strings(envv);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, a[0], &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) throw std::runtime_error("cannot spawn " + argv[0]);
  if (!input.empty()) {
    [[maybe_unused]] auto n = ::write(in_pipe[1], input.data(), input.size());
  }
  ::close(in_pipe[1]);
  RunResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = decode_status(status);
  return r;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv_in, const Env& env) {
  char tmpl[] = "/tmp/yt-bg-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  out_path_ = std::string(tmpl) + ".out";
  err_path_ = std::string(tmpl) + ".err";
  ::unlink(tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> envv = merged_env(env);
  auto a = c_strings(argv);
  auto e = c_strings(envv);
  int rc = ::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot spawn " + argv[0]);
}

RunResult BackgroundProcess::wait() {
  RunResult r;
  if (!waited_) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    r.exit_code = decode_status(status);
  }
  std::ifstream out(out_path_), err(err_path_);
  std::stringstream so, se;
  so << out.rdbuf();
  se << err.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

BackgroundProcess::~BackgroundProcess() {
  if (!waited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::unlink(out_path_.c_str());
  ::unlink(err_path_.c_str());
}

Daemon::Daemon(const Env& env, const std::vector<std::string>& extra_args,
               const std::vector<std::string>& argv_prefix) {
  int ready_pipe[2];
  if (::pipe2(ready_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  auto home = env.find("YONDER_HOME");
  log_path_ = (home != env.end() ? home->second : std::string("/tmp")) + ".yonderd.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // The child's end of the ready pipe becomes fd 3 (dup2 clears CLOEXEC).
  posix_spawn_file_actions_adddup2(&fa, ready_pipe[1], 3);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv = argv_prefix;
  argv.insert(argv.end(), {program_path("yonderd"), "--ready-fd", "3"});
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // The loopback API on a free port unless the test chose (parallel tests
  // would race for the default 7860).
  Env daemon_env = env;
  daemon_env.emplace("YONDER_API_LISTEN", "127.0.0.1:0");
  std::vector<std::string> envv = merged_env(daemon_env);
  auto a = c_strings(argv);
  auto e = c_strings(envv);
  int rc = ::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(ready_pipe[1]);
  if (rc != 0) {
    ::close(ready_pipe[0]);
    throw std::runtime_error("cannot spawn yonderd");
  }
  // The event: "ready\n" on the pipe, or EOF if the daemon exits first.
  std::string got;
  char buf[16];
  pollfd p{ready_pipe[0], POLLIN, 0};
  while (got.find('\n') == std::string::npos && ::poll(&p, 1, 60000) > 0) {
    ssize_t n = ::read(ready_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(ready_pipe[0]);
  ready_ = got == "ready\n";
}

int Daemon::wait() {
  if (!exited_ && pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    status_ = decode_status(status);
    exited_ = true;
  }
  return status_;
}

int Daemon::stop() {
  if (!exited_ && pid_ > 0) ::kill(pid_, SIGTERM);
  return wait();
}

Daemon::~Daemon() {
  stop();
  if (const char* keep = std::getenv("YONDER_KEEP_DAEMON_LOGS")) {
    // Debugging aid: keep a copy of every daemon's log in that folder.
    std::ifstream in(log_path_);
    std::ofstream out(std::string(keep) + "/yonderd-" + std::to_string(pid_) + ".log");
    out << in.rdbuf() << "\n[exit status " << status_ << "]\n";
  }
  ::unlink(log_path_.c_str());
}

std::string Daemon::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace yonder::testing
