// The worker: the provider's end of a remote-CUDA session. It executes the
// driver calls a consumer's program makes, one request at a time, against
// the driver loaded in its own process (the real libcuda.so.1 next to the
// GPU, or the test double), and keeps the session's handles.
//
// Sans-I/O but for the driver: CallWorker takes a request's bytes and
// appends its reply; the loop that reads and writes a socket is
// serve_connection() (worker_loop.cpp). Not thread-safe: one thread owns a
// worker, as the driver's current context is per thread.
//
// Against a hostile client: requests are decoded by call_codec.h's bounded
// decoders; handles are ids looked up in this session's table; a launch's
// argument buffer must be exactly the size of the kernel's parameter
// layout as the driver reports it. The worker runs in a container of its
// own on the provider, under the session's VRAM budget (the VRAM guard
// preloaded into it), so what a client can reach is this one process's
// driver state.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/cuda/driver_api.h"
#include "gpu/remote/call_codec.h"
#include "gpu/remote/call_table.h"

namespace yonder::gpu::remote {

// The driver's entry points the worker calls: one per driver row of the
// table, plus the two the protocol's own calls use. A null entry point (an
// older driver) makes its call answer CUDA_ERROR_NOT_SUPPORTED.
struct DriverTable {
#define YONDER_REMOTE_DRIVER_FIELD_kGenerated(name) PFN_##name name = nullptr;
#define YONDER_REMOTE_DRIVER_FIELD_kWritten(name) PFN_##name name = nullptr;
#define YONDER_REMOTE_DRIVER_FIELD_kOurs(name)
#define YONDER_REMOTE_DRIVER_FIELD(id, name, mode, origin, ...) YONDER_REMOTE_DRIVER_FIELD_##origin(name)
  YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_DRIVER_FIELD)
#undef YONDER_REMOTE_DRIVER_FIELD
  PFN_cuFuncGetParamInfo cuFuncGetParamInfo = nullptr;
  PFN_cuLaunchKernel cuLaunchKernel = nullptr;
};

// Looks every entry point up in a dlopen'd driver.
DriverTable load_driver(void* library);

class CallWorker {
 public:
  explicit CallWorker(const DriverTable& driver, size_t max_handles = 1u << 20);

  // Handles one request (a frame's body, without its length prefix) and
  // appends the reply frame, if the call has one, to `out`. False when the
  // session must end: a malformed request, or a hello this worker refuses
  // (whose reply is still appended); error() says why.
  bool handle(const uint8_t* body, size_t size, std::vector<uint8_t>& out);
  const std::string& error() const { return error_; }

  uint64_t calls() const { return calls_; }
  size_t handles() const { return handles_.size(); }

 private:
  template <Mode M, class... P, class Fn>
  bool run(Reader& r, CallId id, Fn fn, std::vector<uint8_t>& out);
  bool hello(Reader& r, std::vector<uint8_t>& out);
  bool fail(std::string why);
  void reply_header(Writer& w, CUresult result);

  // The protocol's own calls (call_table.h).
  CUresult ycFuncParamLayout(CUfunction function, uint32_t* count, void* pairs, uint64_t capacity);
  CUresult ycLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                          unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,
                          CUstream stream, uint32_t form, const void* args, uint64_t size);
  // A kernel's parameters as (offset, size), from cuFuncGetParamInfo,
  // remembered per function until a module is unloaded.
  CUresult layout_of(CUfunction function, const std::vector<std::pair<uint64_t, uint64_t>>*& layout);

  DriverTable driver_;
  HandleTable handles_;
  bool greeted_ = false;
  uint16_t deferred_call_ = 0;
  CUresult deferred_result_ = CUDA_SUCCESS;
  uint64_t calls_ = 0;
  std::string error_;
  std::unordered_map<CUfunction, std::vector<std::pair<uint64_t, uint64_t>>> layouts_;
};

// Serves one client on a connected socket until it closes (0) or sends
// what ends the session (1, with the reason on stderr).
int serve_connection(int fd, CallWorker& worker);

}  // namespace yonder::gpu::remote
