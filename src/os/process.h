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

}  // namespace yonder::os
