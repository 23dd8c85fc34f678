// A process in a NAT lab node with a pipe on its stdin and one on its
// stdout+stderr, read line by line on a thread of its own, so the test can
// wait for a line (an event, not a sleep) and the process never blocks on a
// full pipe however long it runs (a gateway daemon logging every request).
// Closing stdin is how tools such as portmap_probe's `hold` are told to exit.
// Killed (SIGKILL) and reaped when destroyed if still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/nat_lab.h"

namespace yonder::testing {

class PipedProcess {
 public:
  // `ip netns exec` in `node`, then argv (argv[0] a path). Throws
  // std::runtime_error if it cannot be started.
  PipedProcess(const NatLab& lab, std::string_view node, const std::vector<std::string>& argv);
  ~PipedProcess();
  PipedProcess(const PipedProcess&) = delete;
  PipedProcess& operator=(const PipedProcess&) = delete;

  // The first line (since the start) for which `pred` holds; "" when the
  // output ends first, or when `timeout` passes (a bound for a broken lab,
  // not a timing assertion).
  std::string wait_for_line(const std::function<bool(const std::string&)>& pred,
                            std::chrono::milliseconds timeout = std::chrono::minutes(2));
  // Every line so far.
  std::string output() const;
  void close_stdin();
  void terminate();  // SIGTERM, if it still runs
  // Waits for the exit; the exit status, or -1 if a signal ended it.
  int wait();
  pid_t pid() const { return pid_; }

 private:
  void read_all();

  pid_t pid_ = -1;
  bool waited_ = false;
  int status_ = -1;
  int stdin_ = -1, out_ = -1;
  mutable std::mutex mu_;  // guards lines_ and eof_
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread reader_;  // last: starts once the rest is set up
};

}  // namespace yonder::testing
