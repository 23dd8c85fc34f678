/* A TEST DOUBLE of the CUDA driver (libcuda.so.1), for tests only: the
 * entry points the VRAM guard wraps, on a pretend device of 16 GiB, so the
 * guard is tested on machines without a GPU. It hands out addresses from a
 * counter (no host memory behind them: the tests look at budgets, not
 * contents) and keeps the bytes each one holds, so cuMemGetInfo_v2 reports
 * what is free. cuGetProcAddress(_v2) resolves base names the way the real
 * driver does: the _v2 entry point for cudaVersion >= 3020, the _ptsz one
 * when the per-thread default stream flag is set.
 *
 * Signatures from NVIDIA's CUDA Driver API reference (our declarations,
 * src/gpu/cuda/driver_api.h). Not thread-safe beyond one mutex; enough for
 * the probe. Never installed, never shipped. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "gpu/cuda/driver_api.h"

#define EXPORT __attribute__((visibility("default")))
#define DEVICE_BYTES (16ULL << 30)
#define MAX_LIVE 4096

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_next = 0x700000000000ULL;
static uint64_t g_used;
static struct {
  uint64_t key;
  uint64_t bytes;
} g_live[MAX_LIVE];

static CUresult take(uint64_t* out, uint64_t bytes) {
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_mu);
  if (bytes > 0 && bytes <= DEVICE_BYTES - g_used) {
    for (int i = 0; i < MAX_LIVE; ++i) {
      if (g_live[i].key != 0) continue;
      g_live[i].key = g_next;
      g_live[i].bytes = bytes;
      *out = g_next;
      g_next += (bytes + 0xfffff) & ~0xfffffULL;
      g_used += bytes;
      r = CUDA_SUCCESS;
      break;
    }
  } else if (bytes == 0) {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static CUresult give(uint64_t key) {
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_LIVE; ++i) {
    if (g_live[i].key != key || key == 0) continue;
    g_used -= g_live[i].bytes;
    g_live[i].key = 0;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

EXPORT CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
/* One device, one context: enough for a client that makes its context
 * current as it must on the real driver. */
static struct CUctx_st* const kOnlyContext = (struct CUctx_st*)0x1000;
EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == NULL || ordinal != 0) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  if (ctx == NULL || device != 0) return CUDA_ERROR_INVALID_VALUE;
  *ctx = kOnlyContext;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { return ctx == kOnlyContext ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) { return take(dptr, bytes); }
EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  (void)flags;
  return take(dptr, bytes);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  (void)s;
  return take(dptr, bytes);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  (void)s;
  return take(dptr, bytes);
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool p, CUstream s) {
  (void)p;
  (void)s;
  return take(dptr, bytes);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool p, CUstream s) {
  (void)p;
  (void)s;
  return take(dptr, bytes);
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                   unsigned int element) {
  if (element != 4 && element != 8 && element != 16) return CUDA_ERROR_INVALID_VALUE;
  *pitch = (width + 511) / 512 * 512;
  return take(dptr, (uint64_t)*pitch * height);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return give(dptr); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  (void)s;
  return give(dptr);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  (void)s;
  return give(dptr);
}
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                            unsigned long long flags) {
  (void)prop;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return take(handle, size);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return give(handle); }
EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = take(&key, yonder_cuda_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels));
  *handle = (CUarray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = take(&key, yonder_cuda_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
  *handle = (CUarray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuArrayDestroy(CUarray handle) { return give((uint64_t)(uintptr_t)handle); }
EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  pthread_mutex_lock(&g_mu);
  *free_bytes = (size_t)(DEVICE_BYTES - g_used);
  *total_bytes = (size_t)DEVICE_BYTES;
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status);

static void* lookup(const char* symbol, int version, cuuint64_t flags) {
  int v2 = version >= YONDER_CUDA_V2_SINCE;
  int ptsz = (flags & 2) != 0;
  if (strcmp(symbol, "cuInit") == 0) return (void*)cuInit;
  if (strcmp(symbol, "cuMemAlloc") == 0 && v2) return (void*)cuMemAlloc_v2;
  if (strcmp(symbol, "cuMemAllocPitch") == 0 && v2) return (void*)cuMemAllocPitch_v2;
  if (strcmp(symbol, "cuMemFree") == 0 && v2) return (void*)cuMemFree_v2;
  if (strcmp(symbol, "cuMemGetInfo") == 0 && v2) return (void*)cuMemGetInfo_v2;
  if (strcmp(symbol, "cuArrayCreate") == 0 && v2) return (void*)cuArrayCreate_v2;
  if (strcmp(symbol, "cuArray3DCreate") == 0 && v2) return (void*)cuArray3DCreate_v2;
  if (strcmp(symbol, "cuArrayDestroy") == 0) return (void*)cuArrayDestroy;
  if (strcmp(symbol, "cuMemAllocManaged") == 0) return (void*)cuMemAllocManaged;
  if (strcmp(symbol, "cuMemCreate") == 0) return (void*)cuMemCreate;
  if (strcmp(symbol, "cuMemRelease") == 0) return (void*)cuMemRelease;
  if (strcmp(symbol, "cuMemAllocAsync") == 0) return ptsz ? (void*)cuMemAllocAsync_ptsz : (void*)cuMemAllocAsync;
  if (strcmp(symbol, "cuMemFreeAsync") == 0) return ptsz ? (void*)cuMemFreeAsync_ptsz : (void*)cuMemFreeAsync;
  if (strcmp(symbol, "cuMemAllocFromPoolAsync") == 0) {
    return ptsz ? (void*)cuMemAllocFromPoolAsync_ptsz : (void*)cuMemAllocFromPoolAsync;
  }
  if (strcmp(symbol, "cuGetProcAddress") == 0) {
    return version >= YONDER_CUDA_PROC_ADDRESS_V2_SINCE ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
  }
  return NULL;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pfn = lookup(symbol, version, flags);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pfn = lookup(symbol, version, flags);
  if (status != NULL) *status = *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}
