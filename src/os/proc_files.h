// Reading small text files that the kernel or another program writes
// (/proc/<pid>/cgroup, /proc/self/mountinfo), bounded in size.
#pragma once

#include <string>

#include "base/error.h"

namespace yonder::os {

// The file's bytes, at most `max` (kResourceExhausted past it); kNotFound
// when it does not exist.
Result<std::string> read_small_file(const std::string& path, size_t max = 1 << 20);

}  // namespace yonder::os
