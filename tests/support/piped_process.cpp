#include "support/piped_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

extern char** environ;

namespace yonder::testing {

PipedProcess::PipedProcess(const NatLab& lab, std::string_view node, const std::vector<std::string>& argv) {
  std::vector<std::string> full{ip_program(), "netns", "exec", lab.netns(node)};
  full.insert(full.end(), argv.begin(), argv.end());
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  std::vector<char*> a;
  for (auto& s : full) a.push_back(s.data());
  a.push_back(nullptr);
  int rc = ::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw std::runtime_error("posix_spawn " + full[0] + " failed: " + std::strerror(rc));
  }
  stdin_ = in[1];
  out_ = out[0];
  reader_ = std::thread([this] { read_all(); });
}

PipedProcess::~PipedProcess() {
  if (pid_ > 0 && !waited_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
  close_stdin();
  if (reader_.joinable()) reader_.join();
  ::close(out_);
}

std::string PipedProcess::wait_for_line(const std::function<bool(const std::string&)>& pred,
                                        std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  size_t seen = 0;
  std::string found;
  cv_.wait_for(lock, timeout, [&] {
    for (; seen < lines_.size(); ++seen) {
      if (pred(lines_[seen])) {
        found = lines_[seen];
        return true;
      }
    }
    return eof_;
  });
  return found;
}

std::string PipedProcess::output() const {
  std::lock_guard lock(mu_);
  std::string all;
  for (auto& l : lines_) all += l + "\n";
  return all;
}

void PipedProcess::close_stdin() {
  if (stdin_ >= 0) ::close(stdin_);
  stdin_ = -1;
}

void PipedProcess::terminate() {
  if (pid_ > 0 && !waited_) ::kill(pid_, SIGTERM);
}

int PipedProcess::wait() {
  if (waited_) return status_;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  waited_ = true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return status_;
}

void PipedProcess::read_all() {
  std::string partial;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) break;
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    std::lock_guard lock(mu_);
    while ((nl = partial.find('\n')) != std::string::npos) {
      lines_.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
    }
    cv_.notify_all();
  }
  std::lock_guard lock(mu_);
  if (!partial.empty()) lines_.push_back(partial);
  eof_ = true;
  cv_.notify_all();
}

}  // namespace yonder::testing
