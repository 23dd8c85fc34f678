// What the consumer computes about one replica of a `--replicas K` mesh
// job once its outputs are home (mesh/jobs/mesh_jobs.h): a canonical digest of
// its answer, and the user's validator's verdict. Blocking (disk, a child
// process): worker threads only.
//
// The digest is SHA-256 over, line by line:
//   yonder-replica-digest-v1
//   exit <code>
//   stdout <sha256 of the job's stdout>
//   stderr <sha256 of its stderr>
//   file <relative path> <sha256 of its bytes>     (every regular file under
//                                                   the folder, by path, bytewise)
// so two providers that ran the same job to the same result give the same
// digest whatever order their output arrived in. Links are left out.
#pragma once

#include <chrono>
#include <string>

#include "base/error.h"

namespace yonder::mesh {

Result<std::string> replica_digest(const std::string& folder, const std::string& stdout_bytes,
                                   const std::string& stderr_bytes, int exit_code);

// Runs `command` with /bin/sh in `folder`; true when it exits 0. At most
// `timeout` (then it counts as a rejection).
Result<bool> run_validator(const std::string& folder, const std::string& command, std::chrono::milliseconds timeout);

}  // namespace yonder::mesh
