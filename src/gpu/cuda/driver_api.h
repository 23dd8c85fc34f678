/* The CUDA driver API as far as Yonder touches it: our own declarations,
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
  CUDA_ERROR_NOT_FOUND = 500,
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

typedef enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

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
typedef CUresult (*PFN_cuGetProcAddress)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* symbol_status);

#ifdef __cplusplus
}
#endif

#endif /* YONDER_GPU_CUDA_DRIVER_API_H */
