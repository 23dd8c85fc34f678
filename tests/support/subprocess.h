// Running the real yonder and yonderd binaries from integration tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace yonder::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

using Env = std::map<std::string, std::string>;

// The current environment plus `env` (an empty value unsets), as KEY=VALUE.
std::vector<std::string> merged_env(const Env& env);

// Path of a built program, from YONDER_BIN_<NAME> set by CMake.
std::string program_path(const std::string& name);

// Runs argv with the current environment plus `env` (an empty value unsets),
// feeding `input` on stdin; waits for it to exit.
RunResult run(const std::vector<std::string>& argv, const Env& env = {}, const std::string& input = "");

// A program running in the background (stdin /dev/null, stdout and stderr
// kept in files) while the test does something else; wait() collects it.
// Killed (SIGKILL) on destruction if still running.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const Env& env = {});
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;
  int pid() const { return pid_; }
  RunResult wait();

 private:
  int pid_ = -1;
  bool waited_ = false;
  std::string out_path_, err_path_;
};

// A yonderd started for a test; waits for its readiness event (--ready-fd).
// Stops it with SIGTERM on destruction. `argv_prefix` goes before yonderd
// (its first element a path), e.g. {"/usr/sbin/ip", "netns", "exec", NS} to
// run it in a network namespace; the prefix must exec yonderd in its place so
// that pid() and the signals reach the daemon itself.
class Daemon {
 public:
  Daemon(const Env& env, const std::vector<std::string>& extra_args = {},
         const std::vector<std::string>& argv_prefix = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  bool ready() const { return ready_; }
  int pid() const { return pid_; }
  // SIGTERM and wait; returns the exit status (-1 if killed by a signal).
  int stop();
  // Waits for the daemon to exit on its own; returns its exit status.
  int wait();
  // Everything the daemon wrote to stderr so far.
  std::string log() const;

 private:
  int pid_ = -1;
  bool ready_ = false;
  bool exited_ = false;
  int status_ = -1;
  std::string log_path_;
};

}  // namespace yonder::testing
