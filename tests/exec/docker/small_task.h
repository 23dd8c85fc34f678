// What the Docker and the Podman executor tests share: random names (owners,
// job ids) and the small task every test starts from.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec/executor.h"
#include "support/docker_env.h"

namespace yonder::exec::docker {

inline std::string random_hex(int n) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back("0123456789abcdef"[rd() % 16]);
  return s;
}

// The test image running `cmd` with small limits (64 MiB of memory, 16 MiB
// of workspace, 64 processes).
inline TaskSpec small_task(std::vector<std::string> cmd) {
  TaskSpec s;
  s.job_id = random_hex(16);
  s.image = testing::kTestImage;
  s.command = std::move(cmd);
  s.limits.memory_bytes = 64 << 20;
  s.limits.tmp_bytes = 8 << 20;
  s.limits.shm_bytes = 8 << 20;
  s.limits.disk_bytes = 16 << 20;
  s.limits.pids = 64;
  return s;
}

}  // namespace yonder::exec::docker
