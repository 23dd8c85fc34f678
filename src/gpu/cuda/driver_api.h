/* The CUDA driver API (and NVML's memory query) as far as Yonder touches
 * it: our own declarations,
 * written from NVIDIA's public CUDA Driver API reference (docs.nvidia.com,
 * "CUDA Driver API", sections Memory Management, Virtual Memory Management,
 * Stream Ordered Memory Allocator, Driver Entry Point Access). Debian main
 * ships no CUDA headers, so nothing here comes from cuda.h; the layouts are
 * the documented C ABI of libcuda.so.1 on 64-bit Linux.
 *
 * ABI notes:
 *   - CUdeviceptr is an unsigned 64-bit integer since CUDA 3.2; the _v2
 *     entry points (cuMemAlloc_v2, cuMemFree_v2, cuMemGetInfo_v2,
 *     cuMemAllocPitch_v2) take size_t sizes and are what cuda.h's
 *     unsuffixed names have meant since 3.2 (the unsuffixed symbols are
 *     the old 32-bit ABI and are not wrapped).
 *   - cuGetProcAddress (CUDA 11.3) takes (symbol, pfn, cudaVersion, flags);
 *     cuGetProcAddress_v2 (CUDA 12.0, what cuda.h 12.x's cuGetProcAddress
 *     means) adds a CUdriverProcAddressQueryResult* last. `symbol` is the
 *     base name ("cuMemAlloc"); the driver picks the versioned entry point
 *     from cudaVersion (1000 * major + 10 * minor).
 *   - cuMemAllocAsync and cuMemAllocFromPoolAsync (11.2), cuMemCreate
 *     (10.2) and cuMemAllocManaged (6.0) have one ABI each so far.
 *
 * Plain C, so that the VRAM guard (a small preloaded library that must load
 * into any container's libc) and its test double can include it. Only what
 * is used is declared. */
#ifndef YONDER_GPU_CUDA_DRIVER_API_H
#define YONDER_GPU_CUDA_DRIVER_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_FILE_NOT_FOUND = 301,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

typedef uint64_t CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef uint64_t CUmemGenericAllocationHandle;
/* cuMemCreate's properties: only the size argument beside it is read here. */
typedef struct CUmemAllocationProp_st CUmemAllocationProp;

/* CUDA arrays (cuArrayCreate_v2, cuArray3DCreate_v2: the _v2 descriptors,
 * with size_t extents, since CUDA 3.2). CUarray_format's values are the
 * documented CU_AD_FORMAT_* constants; only those whose element size is
 * plain are named here. */
typedef struct CUarray_st* CUarray;
typedef int CUarray_format;
enum {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
};
typedef struct {
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

/* Contexts, devices, streams, events, modules and launches, from the
 * reference's sections Device Management, Primary Context Management,
 * Context Management, Stream Management, Event Management, Module
 * Management, Execution Control and Occupancy: what the remote-CUDA stand-in
 * (src/gpu/remote) forwards. Handles are opaque pointers the driver hands
 * out; CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) are the two
 * documented stream values that are not handles. cuFuncGetParamInfo is CUDA
 * 12.4. cuLaunchKernel's `extra` is a list of (key, value) pointers ended by
 * CU_LAUNCH_PARAM_END; with CU_LAUNCH_PARAM_BUFFER_POINTER and
 * CU_LAUNCH_PARAM_BUFFER_SIZE the arguments come as one packed buffer. */
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUevent_st* CUevent;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
/* The stream values that are not handles, and the keys of cuLaunchKernel's
 * `extra`, as the numbers they are (the driver's header casts them to
 * CUstream and void*). */
enum { YONDER_CU_STREAM_LEGACY = 0x1, YONDER_CU_STREAM_PER_THREAD = 0x2 };
enum {
  YONDER_CU_LAUNCH_PARAM_END = 0x00,
  YONDER_CU_LAUNCH_PARAM_BUFFER_POINTER = 0x01,
  YONDER_CU_LAUNCH_PARAM_BUFFER_SIZE = 0x02,
};

/* cuMemHostAlloc and cuMemHostRegister flags: host memory mapped into the
 * device's address space (which a remote GPU cannot do). */
enum { YONDER_CU_MEMHOSTALLOC_DEVICEMAP = 0x02, YONDER_CU_MEMHOSTREGISTER_DEVICEMAP = 0x02 };
/* A JIT option's name (CUjit_option); only passed through or ignored here. */
typedef int CUjit_option;

typedef CUresult (*PFN_cuDriverGetVersion)(int* version);
typedef CUresult (*PFN_cuDeviceGetCount)(int* count);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice* device, int ordinal);
typedef CUresult (*PFN_cuDeviceGetName)(char* name, int length, CUdevice device);
typedef CUresult (*PFN_cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int* value, CUdevice_attribute attribute, CUdevice device);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v2)(CUdevice device);
typedef CUresult (*PFN_cuDeviceComputeCapability)(int* major, int* minor, CUdevice device);
typedef CUresult (*PFN_cuCtxCreate_v2)(CUcontext* ctx, unsigned int flags, CUdevice device);
typedef CUresult (*PFN_cuCtxDestroy_v2)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxPushCurrent_v2)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxPopCurrent_v2)(CUcontext* ctx);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxGetCurrent)(CUcontext* ctx);
typedef CUresult (*PFN_cuCtxGetDevice)(CUdevice* device);
typedef CUresult (*PFN_cuCtxSynchronize)(void);
typedef CUresult (*PFN_cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
typedef CUresult (*PFN_cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*PFN_cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*PFN_cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
typedef CUresult (*PFN_cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
typedef CUresult (*PFN_cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t count);
typedef CUresult (*PFN_cuMemsetD32_v2)(CUdeviceptr dst, unsigned int value, size_t count);
typedef CUresult (*PFN_cuMemsetD16_v2)(CUdeviceptr dst, unsigned short value, size_t count);
typedef CUresult (*PFN_cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
typedef CUresult (*PFN_cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
typedef CUresult (*PFN_cuMemsetD32Async)(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);
typedef CUresult (*PFN_cuMemAllocHost_v2)(void** host, size_t bytes);
typedef CUresult (*PFN_cuMemHostAlloc)(void** host, size_t bytes, unsigned int flags);
typedef CUresult (*PFN_cuMemFreeHost)(void* host);
typedef CUresult (*PFN_cuMemHostRegister_v2)(void* host, size_t bytes, unsigned int flags);
typedef CUresult (*PFN_cuMemHostUnregister)(void* host);
typedef CUresult (*PFN_cuStreamCreate)(CUstream* stream, unsigned int flags);
typedef CUresult (*PFN_cuStreamDestroy_v2)(CUstream stream);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream stream);
typedef CUresult (*PFN_cuStreamQuery)(CUstream stream);
typedef CUresult (*PFN_cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
typedef CUresult (*PFN_cuEventCreate)(CUevent* event, unsigned int flags);
typedef CUresult (*PFN_cuEventRecord)(CUevent event, CUstream stream);
typedef CUresult (*PFN_cuEventSynchronize)(CUevent event);
typedef CUresult (*PFN_cuEventQuery)(CUevent event);
typedef CUresult (*PFN_cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent event);
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule* module, const void* image);
typedef CUresult (*PFN_cuModuleLoad)(CUmodule* module, const char* path);
typedef CUresult (*PFN_cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned int options,
                                           CUjit_option* names, void** values);
typedef CUresult (*PFN_cuModuleGetGlobal_v2)(CUdeviceptr* address, size_t* bytes, CUmodule module, const char* name);
typedef CUresult (*PFN_cuModuleUnload)(CUmodule module);
typedef CUresult (*PFN_cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
typedef CUresult (*PFN_cuFuncGetAttribute)(int* value, CUfunction_attribute attribute, CUfunction function);
typedef CUresult (*PFN_cuFuncGetParamInfo)(CUfunction function, size_t index, size_t* offset, size_t* size);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                       unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                       unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                                       void** params, void** extra);
typedef CUresult (*PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, CUfunction function,
                                                                    int block_size, size_t dynamic_shared_bytes);
typedef CUresult (*PFN_cuGetErrorName)(CUresult error, const char** name);
typedef CUresult (*PFN_cuGetErrorString)(CUresult error, const char** text);

/* The CUDA version from which a base name means its _v2 entry point. */
#define YONDER_CUDA_V2_SINCE 3020
/* The CUDA version from which "cuGetProcAddress" means cuGetProcAddress_v2. */
#define YONDER_CUDA_PROC_ADDRESS_V2_SINCE 12000

typedef CUresult (*PFN_cuInit)(unsigned int flags);
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytesize);
typedef CUresult (*PFN_cuMemAllocPitch_v2)(CUdeviceptr* dptr, size_t* pitch, size_t width_in_bytes, size_t height,
                                           unsigned int element_size_bytes);
typedef CUresult (*PFN_cuMemAllocManaged)(CUdeviceptr* dptr, size_t bytesize, unsigned int flags);
typedef CUresult (*PFN_cuMemAllocAsync)(CUdeviceptr* dptr, size_t bytesize, CUstream stream);
typedef CUresult (*PFN_cuMemAllocFromPoolAsync)(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream stream);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemFreeAsync)(CUdeviceptr dptr, CUstream stream);
typedef CUresult (*PFN_cuMemCreate)(CUmemGenericAllocationHandle* handle, size_t size,
                                    const CUmemAllocationProp* prop, unsigned long long flags);
typedef CUresult (*PFN_cuMemRelease)(CUmemGenericAllocationHandle handle);
typedef CUresult (*PFN_cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes);
typedef CUresult (*PFN_cuArrayCreate_v2)(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* descriptor);
typedef CUresult (*PFN_cuArray3DCreate_v2)(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* descriptor);
typedef CUresult (*PFN_cuArrayDestroy)(CUarray handle);

/* The bytes of an array's elements: width x height x depth (0 counts as 1)
 * x channels x the format's element size; a format not named above counts
 * 8 bytes a channel, more than any plain one. 0 on overflow. */
static inline uint64_t yonder_cuda_array_bytes(uint64_t width, uint64_t height, uint64_t depth,
                                               CUarray_format format, unsigned int channels) {
  uint64_t element;
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      element = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      element = 2;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      element = 4;
      break;
    default:
      element = 8;
  }
  uint64_t dims[4] = {width ? width : 1, height ? height : 1, depth ? depth : 1, channels ? channels : 1u};
  uint64_t bytes = element;
  for (int i = 0; i < 4; ++i) {
    if (dims[i] != 0 && bytes > UINT64_MAX / dims[i]) return 0;
    bytes *= dims[i];
  }
  return bytes;
}
typedef CUresult (*PFN_cuGetProcAddress)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* symbol_status);

/* NVML (libnvidia-ml.so.1), as far as the VRAM guard touches it, from
 * NVIDIA's NVML API reference ("Device Queries"): the memory a device
 * reports. nvmlDeviceGetMemoryInfo (all NVML versions) fills an
 * nvmlMemory_t; nvmlDeviceGetMemoryInfo_v2 (driver 510 and later) an
 * nvmlMemory_v2_t whose first field is its version. */
typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1 };
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMemoryInfo)(nvmlDevice_t device, nvmlMemory_t* memory);
typedef nvmlReturn_t (*PFN_nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t device, nvmlMemory_v2_t* memory);

#ifdef __cplusplus
}
#endif

#endif /* YONDER_GPU_CUDA_DRIVER_API_H */
