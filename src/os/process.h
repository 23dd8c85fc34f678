// Running a helper program and capturing its output (no shell involved).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"

namespace yonder::os {

struct ProcessOutput {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string output;  // stdout and stderr together, at most max_output bytes
};

// kNotFound when the program cannot be executed.
Result<ProcessOutput> run_capture(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                  size_t max_output = 64 * 1024);

// Where the package and the build tree put Yonder's private libraries and
// helper programs: lib/yonder beside the folder of the running program
// (/usr/bin -> /usr/lib/yonder; build/dev/apps -> build/dev/lib/yonder),
// joined with `name`. Empty when the running program cannot be found.
std::string private_lib_path(const std::string& name);

// Starts `argv` in the background with `fd` as its descriptor 3, stdin
// /dev/null, stdout and stderr the caller's, nothing else inherited, and
// the current environment with `env` (NAME=VALUE entries) replacing or
// adding variables.
// Returns its pid; the caller reaps it. kNotFound when it cannot be run.
Result<int> spawn_with_fd(const std::vector<std::string>& argv, const std::vector<std::string>& env, int fd);

}  // namespace yonder::os
