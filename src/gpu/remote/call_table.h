// The one table of the calls remote CUDA carries. Each row gives a call's
// wire id (stable: a new call takes a new id, an id is never reused), its
// name, whether the client waits for it, where its two ends come from, and
// its parameters in the driver's order, each with its direction and, for
// buffers, which parameter holds the length. From this table come the
// stand-in's exported functions (standin.cpp), the request and reply
// encoders and decoders on both sides (call_codec.h), the worker's dispatch
// (worker.cpp), the fuzzer's grammar and the coverage table in README.md.
//
// Every row whose origin is a driver entry point is checked at compile time
// against our declaration of that entry point (gpu/cuda/driver_api.h), so a
// parameter list that does not match the driver's ABI does not build.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/cuda/driver_api.h"

namespace yonder::gpu::remote {

// Does the client wait for the call? Fire-and-forget calls (launches,
// copies to the device, frees, records) are sent without waiting; their
// errors surface at the next synchronous call (wire.h).
enum class Mode : uint8_t { kSync, kAsync };

// Where a row's two ends come from.
enum class Origin : uint8_t {
  kGenerated,  // a driver entry point: the stand-in's export is generated, the worker calls the driver
  kWritten,    // a driver entry point whose export is written by hand (chunked copies, the current context)
  kOurs,       // a call of the protocol itself, written by hand on both sides
};

// Parameter kinds. `Arg` is the parameter's type in the driver's (or our)
// C signature.
template <class T>
struct In {  // a value the caller passes: sent as its bytes
  using Arg = T;
};
template <class T>
struct Out {  // a value the callee fills in: returned in the reply
  using Arg = T*;
};
template <class H>
struct InHandle {  // a handle the worker handed out: sent as its id, looked up in the worker's table
  using Arg = H;
};
template <class H>
struct OutHandle {  // a handle the callee creates: the worker keeps it and returns an id
  using Arg = H*;
};
template <class H, size_t Parent>
struct OutChildHandle {  // as OutHandle, and dropped when the handle in parameter Parent is
  using Arg = H*;
};
template <class H>
struct DropHandle {  // a handle the call destroys: its id is forgotten once the call succeeds
  using Arg = H;
};
template <class T>
struct OptOut {  // as Out, where the caller may pass NULL for a value it does not want
  using Arg = T*;
};
template <size_t Length>
struct InBytes {  // a buffer the caller passes, of the length in parameter Length
  using Arg = const void*;
};
template <size_t Length>
struct OutBytes {  // a buffer the callee fills, of the length in parameter Length
  using Arg = void*;
};
template <size_t Length>
struct OutChars {  // as OutBytes, for char buffers (names)
  using Arg = char*;
};
struct InName {  // a NUL-terminated name, at most kMaxNameBytes
  using Arg = const char*;
};
struct InImage {  // a module image: PTX text, an ELF cubin or a fatbin; its length read from its header
  using Arg = const void*;
};

// Kinds named so that no row's kinds hold a comma (the rows are macro
// arguments): cuModuleGetFunction's function, dropped with the module in
// its parameter 1.
using OutFunctionOfModule = OutChildHandle<CUfunction, 1>;

// X(id, name, mode, origin, parameter kinds...)
// clang-format off
#define YONDER_REMOTE_CUDA_CALLS(X)                                                                         \
  X(1, cuInit, kSync, kGenerated, In<unsigned int>)                                                           \
  X(2, cuDriverGetVersion, kSync, kGenerated, Out<int>)                                                       \
  X(3, cuDeviceGetCount, kSync, kGenerated, Out<int>)                                                         \
  X(4, cuDeviceGet, kSync, kGenerated, Out<CUdevice>, In<int>)                                                \
  X(5, cuDeviceGetName, kSync, kGenerated, OutChars<1>, In<int>, In<CUdevice>)                                \
  X(6, cuDeviceTotalMem_v2, kSync, kGenerated, Out<size_t>, In<CUdevice>)                                     \
  X(7, cuDeviceGetAttribute, kSync, kGenerated, Out<int>, In<CUdevice_attribute>, In<CUdevice>)               \
  X(8, cuDevicePrimaryCtxRetain, kSync, kGenerated, OutHandle<CUcontext>, In<CUdevice>)                       \
  X(9, cuDevicePrimaryCtxRelease_v2, kSync, kGenerated, In<CUdevice>)                                         \
  X(10, cuCtxSetCurrent, kAsync, kWritten, InHandle<CUcontext>)                                               \
  X(11, cuCtxGetDevice, kSync, kGenerated, Out<CUdevice>)                                                     \
  X(12, cuCtxSynchronize, kSync, kWritten)                                                                    \
  X(13, cuMemAlloc_v2, kSync, kGenerated, Out<CUdeviceptr>, In<size_t>)                                       \
  X(14, cuMemFree_v2, kAsync, kGenerated, In<CUdeviceptr>)                                                    \
  X(15, cuMemGetInfo_v2, kSync, kGenerated, Out<size_t>, Out<size_t>)                                         \
  X(16, cuMemcpyHtoD_v2, kAsync, kWritten, In<CUdeviceptr>, InBytes<2>, In<size_t>)                           \
  X(17, cuMemcpyDtoH_v2, kSync, kWritten, OutBytes<2>, In<CUdeviceptr>, In<size_t>)                           \
  X(18, cuMemcpyDtoD_v2, kAsync, kGenerated, In<CUdeviceptr>, In<CUdeviceptr>, In<size_t>)                    \
  X(19, cuMemcpyHtoDAsync_v2, kAsync, kWritten, In<CUdeviceptr>, InBytes<2>, In<size_t>, InHandle<CUstream>)  \
  X(20, cuMemcpyDtoHAsync_v2, kSync, kWritten, OutBytes<2>, In<CUdeviceptr>, In<size_t>, InHandle<CUstream>)  \
  X(21, cuMemsetD8_v2, kAsync, kGenerated, In<CUdeviceptr>, In<unsigned char>, In<size_t>)                    \
  X(22, cuMemsetD32_v2, kAsync, kGenerated, In<CUdeviceptr>, In<unsigned int>, In<size_t>)                    \
  X(23, cuStreamCreate, kSync, kGenerated, OutHandle<CUstream>, In<unsigned int>)                             \
  X(24, cuStreamDestroy_v2, kAsync, kGenerated, DropHandle<CUstream>)                                         \
  X(25, cuStreamSynchronize, kSync, kGenerated, InHandle<CUstream>)                                           \
  X(26, cuStreamQuery, kSync, kGenerated, InHandle<CUstream>)                                                 \
  X(27, cuStreamWaitEvent, kAsync, kGenerated, InHandle<CUstream>, InHandle<CUevent>, In<unsigned int>)       \
  X(28, cuEventCreate, kSync, kGenerated, OutHandle<CUevent>, In<unsigned int>)                               \
  X(29, cuEventRecord, kAsync, kGenerated, InHandle<CUevent>, InHandle<CUstream>)                             \
  X(30, cuEventSynchronize, kSync, kGenerated, InHandle<CUevent>)                                             \
  X(31, cuEventQuery, kSync, kGenerated, InHandle<CUevent>)                                                   \
  X(32, cuEventElapsedTime, kSync, kGenerated, Out<float>, InHandle<CUevent>, InHandle<CUevent>)              \
  X(33, cuEventDestroy_v2, kAsync, kGenerated, DropHandle<CUevent>)                                           \
  X(34, cuModuleLoadData, kSync, kGenerated, OutHandle<CUmodule>, InImage)                                    \
  X(35, cuModuleUnload, kSync, kGenerated, DropHandle<CUmodule>)                                              \
  X(36, cuModuleGetFunction, kSync, kGenerated, OutFunctionOfModule, InHandle<CUmodule>, InName)               \
  X(37, cuFuncGetAttribute, kSync, kGenerated, Out<int>, In<CUfunction_attribute>, InHandle<CUfunction>)      \
  X(38, cuOccupancyMaxActiveBlocksPerMultiprocessor, kSync, kGenerated, Out<int>, InHandle<CUfunction>,       \
    In<int>, In<size_t>)                                                                                      \
  X(39, cuCtxCreate_v2, kSync, kWritten, OutHandle<CUcontext>, In<unsigned int>, In<CUdevice>)                \
  X(40, cuCtxDestroy_v2, kSync, kWritten, DropHandle<CUcontext>)                                              \
  X(41, cuModuleGetGlobal_v2, kSync, kGenerated, OptOut<CUdeviceptr>, OptOut<size_t>, InHandle<CUmodule>,     \
    InName)                                                                                                   \
  X(42, cuMemsetD16_v2, kAsync, kGenerated, In<CUdeviceptr>, In<unsigned short>, In<size_t>)                  \
  X(43, cuMemcpyDtoDAsync_v2, kAsync, kGenerated, In<CUdeviceptr>, In<CUdeviceptr>, In<size_t>,               \
    InHandle<CUstream>)                                                                                       \
  X(44, cuMemsetD8Async, kAsync, kGenerated, In<CUdeviceptr>, In<unsigned char>, In<size_t>, InHandle<CUstream>) \
  X(45, cuMemsetD32Async, kAsync, kGenerated, In<CUdeviceptr>, In<unsigned int>, In<size_t>, InHandle<CUstream>) \
  /* Ours: a kernel's parameter layout (offset, size pairs as u64), so the stand-in can pack a launch's     \
     arguments; and a launch with its arguments packed (form 0: by that layout; form 1: a buffer given      \
     with CU_LAUNCH_PARAM_BUFFER_POINTER). */                                                                 \
  X(100, ycFuncParamLayout, kSync, kOurs, InHandle<CUfunction>, Out<uint32_t>, OutBytes<3>, In<uint64_t>)     \
  X(101, ycLaunchKernel, kAsync, kOurs, InHandle<CUfunction>, In<unsigned int>, In<unsigned int>,             \
    In<unsigned int>, In<unsigned int>, In<unsigned int>, In<unsigned int>, In<unsigned int>,                 \
    InHandle<CUstream>, In<uint32_t>, InBytes<11>, In<uint64_t>)
// clang-format on

// Call ids, by name: CallId::cuMemAlloc_v2.
enum class CallId : uint16_t {
  kHello = 0,
#define YONDER_REMOTE_CALL_ID(id, name, mode, origin, ...) name = id,
  YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_CALL_ID)
#undef YONDER_REMOTE_CALL_ID
};

// The parameter layout a kernel may have: at most this many parameters.
inline constexpr uint32_t kMaxKernelParams = 1024;
// Launch argument forms (ycLaunchKernel's parameter 9).
inline constexpr uint32_t kLaunchByLayout = 0;
inline constexpr uint32_t kLaunchPackedBuffer = 1;

struct CallInfo {
  uint16_t id;
  const char* name;
  Mode mode;
  Origin origin;
};

// The table's rows, in order; nullptr when `id` names no call.
const CallInfo* find_call(uint16_t id);
const CallInfo* find_call(const char* name);
// Every row, for the coverage table and the fuzzer.
const CallInfo* all_calls(size_t& count);

}  // namespace yonder::gpu::remote
