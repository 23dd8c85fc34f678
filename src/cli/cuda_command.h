// Remote CUDA from the command line (docs/cli.md): `yonder cuda --on PEER
// -- PROGRAM [ARGS...]` runs PROGRAM here with the stand-in libcuda.so.1
// (src/gpu/remote) first on its library path, its driver calls carried by
// the local daemon to PEER's GPU (jobs/sessions/cuda_sessions.h); exits
// with the program's status.
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

struct CudaArgs {
  std::string on;                    // the provider
  std::vector<std::string> command;  // the program and its arguments
};

int cmd_cuda(const Context& ctx, const CudaArgs& args);

}  // namespace yonder::cli
