// A program a test talks to while it runs (`yonder run` attached to a job):
// its output is collected as it comes so the test can wait for a line (an
// event, not a sleep), then send it a signal or keystrokes and await its
// exit. With `terminal`, stdin, stdout and stderr are one pseudo-terminal
// (forkpty), as for a person at a terminal: Ctrl-C written to it raises
// SIGINT in the program through the terminal's line discipline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace yonder::testing {

// The value after "`word` " on its own line of a program's output (what a
// daemon prints at start: "listen 127.0.0.1:4242"); "" when it is not there.
inline std::string line_value(const std::string& out, const std::string& word) {
  size_t at = out.find(word + " ");
  if (at == std::string::npos) return "";
  size_t end = out.find('\n', at);
  if (end == std::string::npos) return "";
  return out.substr(at + word.size() + 1, end - at - word.size() - 1);
}

class LiveProcess {
 public:
  LiveProcess(const std::vector<std::string>& argv, const Env& env, bool terminal = false);
  // Kills (SIGKILL) and reaps the program if it still runs.
  ~LiveProcess();
  LiveProcess(const LiveProcess&) = delete;
  LiveProcess& operator=(const LiveProcess&) = delete;

  // Waits until the output from byte `from` on contains `text`; false when
  // `timeout` passes or the program ends first.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout, size_t from = 0);
  void signal(int sig);
  // To stdin (the terminal's input with `terminal`).
  void write(const std::string& bytes);
  // Waits for the exit: its exit status, 128 + the signal that killed it, or
  // -1 if `timeout` passed first.
  int wait(std::chrono::milliseconds timeout);

  // stdout and stderr as they interleaved (the terminal's output with `terminal`).
  const std::string& output() const { return all_; }
  const std::string& out() const { return out_; }  // stdout alone (the terminal's output with `terminal`)
  const std::string& err() const { return err_; }  // stderr alone (empty with `terminal`)
  pid_t pid() const { return pid_; }

 private:
  // Reads what is there, waiting up to `timeout` for something.
  void pump(std::chrono::milliseconds timeout);

  pid_t pid_ = -1;
  int in_ = -1;  // stdin, or the terminal
  int out_fd_ = -1, err_fd_ = -1;
  bool exited_ = false;
  int status_ = -1;
  std::string out_, err_, all_;
};

}  // namespace yonder::testing
