// SIGINT and SIGTERM as readable bytes: while a SignalPipe is alive the
// handler only writes the signal's number to a pipe, which blocking calls
// can poll (os::HttpRequestOptions::interrupt_fd) and react to at once.
// Used by `yonder run` while it submits (a Ctrl-C cancels the upload) and
// while it is attached (stop or detach).
//
// One at a time per process (the pipe is global); the CLI's one thread.
#pragma once

#include <signal.h>

#include <memory>

#include "base/error.h"

namespace yonder::cli {

class SignalPipe {
 public:
  // Catches SIGINT and SIGTERM while alive; restores what was there before.
  // A SIGINT that was ignored when we started (a background job of a
  // non-interactive shell) stays ignored, as shells and nohup expect.
  static Result<std::unique_ptr<SignalPipe>> install();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const;
  // The next signal received, 0 when none is pending.
  int take();

 private:
  SignalPipe() = default;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  bool int_caught_ = false;
};

}  // namespace yonder::cli
