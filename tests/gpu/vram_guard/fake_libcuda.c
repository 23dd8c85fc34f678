/* A TEST DOUBLE of the CUDA driver (libcuda.so.1), for tests only, on a
 * pretend device of 16 GiB, so what sits on the driver is tested on
 * machines without a GPU:
 *   - the entry points the VRAM guard wraps. Device memory is host memory
 *     mapped without reserve (so a pretend 16 GiB costs nothing until
 *     touched), and each allocation's bytes are kept so cuMemGetInfo_v2
 *     reports what is free. Handles that are not addresses (cuMemCreate,
 *     arrays) come from a counter.
 *   - what remote CUDA (src/gpu/remote) carries: device queries, the
 *     primary context, copies and memsets (checked against the live
 *     allocations, as the driver checks them), streams and events (work
 *     runs at once, so every stream is always done; events keep the time
 *     they were recorded), and modules of TEST KERNELS: an image whose
 *     text begins "yonder-test-module" (or PTX text, ".version") holds
 *     the kernels below, host
 *     functions run at launch. A kernel that touches memory no allocation
 *     holds fails its context's next synchronise with
 *     CUDA_ERROR_LAUNCH_FAILED, as a faulting kernel does (here the error
 *     is cleared once reported).
 * cuGetProcAddress(_v2) resolves base names the way the real driver does:
 * the _v2 entry point for cudaVersion >= 3020, the _ptsz one when the
 * per-thread default stream flag is set.
 *
 * Signatures from NVIDIA's CUDA Driver API reference (our declarations,
 * src/gpu/cuda/driver_api.h). One mutex; enough for the tests. Never
 * installed, never shipped. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "gpu/cuda/driver_api.h"

#define EXPORT __attribute__((visibility("default")))
#define DEVICE_BYTES (16ULL << 30)
#define MAX_LIVE 4096

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_next_handle = 0x700000000000ULL;
static uint64_t g_used;
static CUresult g_sticky = CUDA_SUCCESS;
static struct {
  uint64_t key;
  uint64_t bytes;
  int mapped; /* key is the address of `bytes` of mapped memory */
} g_live[MAX_LIVE];

/* Takes `bytes` of the device: mapped memory when `mapped`, else a handle. */
static CUresult take_as(uint64_t* out, uint64_t bytes, int mapped) {
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_mu);
  if (bytes > 0 && bytes <= DEVICE_BYTES - g_used) {
    for (int i = 0; i < MAX_LIVE; ++i) {
      if (g_live[i].key != 0) continue;
      uint64_t key;
      if (mapped) {
        void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) break;
        key = (uint64_t)(uintptr_t)p;
      } else {
        key = g_next_handle;
        g_next_handle += (bytes + 0xfffff) & ~0xfffffULL;
      }
      g_live[i].key = key;
      g_live[i].bytes = bytes;
      g_live[i].mapped = mapped;
      *out = key;
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

static CUresult take(uint64_t* out, uint64_t bytes) { return take_as(out, bytes, 1); }

/* Is [address, address + bytes) inside one mapped allocation? */
static int device_range(uint64_t address, uint64_t bytes) {
  int ok = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_LIVE && !ok; ++i) {
    if (!g_live[i].mapped || g_live[i].key == 0) continue;
    uint64_t start = g_live[i].key;
    ok = address >= start && address - start <= g_live[i].bytes && bytes <= g_live[i].bytes - (address - start);
  }
  pthread_mutex_unlock(&g_mu);
  return ok;
}

static CUresult give(uint64_t key) {
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_LIVE; ++i) {
    if (g_live[i].key != key || key == 0) continue;
    g_used -= g_live[i].bytes;
    if (g_live[i].mapped) munmap((void*)(uintptr_t)key, g_live[i].bytes);
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
static __thread CUcontext t_current;
/* Contexts made with cuCtxCreate: ids past the primary one; each made
 * current on the creating thread, as on the driver. */
#define MAX_CREATED 64
static int g_created[MAX_CREATED];
static int created_index(CUcontext ctx) {
  uintptr_t v = (uintptr_t)ctx;
  if (v <= (uintptr_t)kOnlyContext || v > (uintptr_t)kOnlyContext + MAX_CREATED) return -1;
  return (int)(v - (uintptr_t)kOnlyContext - 1);
}
EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice device) {
  (void)flags;
  if (ctx == NULL || device != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  int i = 0;
  while (i < MAX_CREATED && g_created[i]) ++i;
  if (i < MAX_CREATED) g_created[i] = 1;
  pthread_mutex_unlock(&g_mu);
  if (i == MAX_CREATED) return CUDA_ERROR_OUT_OF_MEMORY;
  *ctx = (CUcontext)((uintptr_t)kOnlyContext + 1 + (uintptr_t)i);
  t_current = *ctx;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  int i = created_index(ctx);
  pthread_mutex_lock(&g_mu);
  int live = i >= 0 && g_created[i];
  if (live) g_created[i] = 0;
  pthread_mutex_unlock(&g_mu);
  if (!live) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_current == ctx) t_current = NULL;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  int i = created_index(ctx);
  if (ctx != kOnlyContext && ctx != NULL && !(i >= 0 && g_created[i])) return CUDA_ERROR_INVALID_VALUE;
  t_current = ctx;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_current;
  return CUDA_SUCCESS;
}
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
  return take_as(handle, size, 0);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return give(handle); }
EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = take_as(&key, yonder_cuda_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), 0);
  *handle = (CUarray)(uintptr_t)key;
  return r;
}
EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = take_as(&key, yonder_cuda_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels), 0);
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

/* ---- What remote CUDA carries ---- */

EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
  *version = 12040;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int* count) {
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  static const char kName[] = "FAKE CUDA device (test double)";
  if (name == NULL || length <= 0 || device != 0) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, kName, (size_t)length);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (bytes == NULL || device != 0) return CUDA_ERROR_INVALID_VALUE;
  *bytes = (size_t)DEVICE_BYTES;
  return CUDA_SUCCESS;
}
/* The documented attribute numbers: 1 max threads per block, 16
 * multiprocessors, 75/76 compute capability major/minor. */
EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (value == NULL || device != 0) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case 1: *value = 1024; break;
    case 16: *value = 4; break;
    case 75: *value = 8; break;
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}
static CUresult sticky(void) {
  pthread_mutex_lock(&g_mu);
  CUresult r = g_sticky;
  g_sticky = CUDA_SUCCESS;
  pthread_mutex_unlock(&g_mu);
  return r;
}
static void fault(void) {
  pthread_mutex_lock(&g_mu);
  g_sticky = CUDA_ERROR_LAUNCH_FAILED;
  pthread_mutex_unlock(&g_mu);
}
EXPORT CUresult cuCtxSynchronize(void) { return sticky(); }

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  if (!device_range(dst, bytes) || (src == NULL && bytes != 0)) return CUDA_ERROR_INVALID_VALUE;
  memcpy((void*)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (!device_range(src, bytes) || (dst == NULL && bytes != 0)) return CUDA_ERROR_INVALID_VALUE;
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (!device_range(dst, bytes) || !device_range(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream s) {
  (void)s;
  return cuMemcpyHtoD_v2(dst, src, bytes);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  (void)s;
  return cuMemcpyDtoH_v2(dst, src, bytes);
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  if (!device_range(dst, count)) return CUDA_ERROR_INVALID_VALUE;
  memset((void*)(uintptr_t)dst, value, count);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
  if (count > SIZE_MAX / 4 || !device_range(dst, count * 4)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) memcpy((char*)(uintptr_t)dst + 4 * i, &value, 4);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, size_t count) {
  if (count > SIZE_MAX / 2 || !device_range(dst, count * 2)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) memcpy((char*)(uintptr_t)dst + 2 * i, &value, 2);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  (void)s;
  return cuMemcpyDtoD_v2(dst, src, bytes);
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream s) {
  (void)s;
  return cuMemsetD8_v2(dst, value, count);
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream s) {
  (void)s;
  return cuMemsetD32_v2(dst, value, count);
}

/* Streams, events and modules come from fixed pools (no heap, so a test
 * that leaves some behind leaks nothing); work runs at once. */
#define POOL 1024
struct CUstream_st {
  int used;
  unsigned int flags;
};
struct CUevent_st {
  int used;
  int recorded;
  double ms;
};
struct CUmod_st {
  int used;
  uint64_t counter; /* the module's global `yonder_counter` (4 zero bytes), as in the test PTX */
};
static struct CUstream_st g_streams[POOL];
static struct CUevent_st g_events[POOL];
static struct CUmod_st g_modules[POOL];
#define POOL_TAKE(pool, out)                      \
  do {                                            \
    *(out) = NULL;                                \
    pthread_mutex_lock(&g_mu);                    \
    for (int i_ = 0; i_ < POOL; ++i_) {           \
      if (!(pool)[i_].used) {                     \
        memset(&(pool)[i_], 0, sizeof((pool)[0])); \
        (pool)[i_].used = 1;                      \
        *(out) = &(pool)[i_];                     \
        break;                                    \
      }                                           \
    }                                             \
    pthread_mutex_unlock(&g_mu);                  \
  } while (0)
/* Is `p` a live member of `pool`? (A forged handle reaching the driver
 * would fail here instead of crashing the test.) */
#define POOL_LIVE(pool, p) \
  ((p) != NULL && (p) >= &(pool)[0] && (p) < &(pool)[POOL] && (p)->used)

EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (stream == NULL) return CUDA_ERROR_INVALID_VALUE;
  POOL_TAKE(g_streams, stream);
  if (*stream == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  (*stream)->flags = flags;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  if (!POOL_LIVE(g_streams, stream)) return CUDA_ERROR_INVALID_HANDLE;
  stream->used = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return sticky();
}
EXPORT CUresult cuStreamQuery(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  (void)stream;
  if (!POOL_LIVE(g_events, event)) return CUDA_ERROR_INVALID_HANDLE;
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  (void)flags;
  if (event == NULL) return CUDA_ERROR_INVALID_VALUE;
  POOL_TAKE(g_events, event);
  return *event != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)stream;
  if (!POOL_LIVE(g_events, event)) return CUDA_ERROR_INVALID_HANDLE;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  event->ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
  event->recorded = 1;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventSynchronize(CUevent event) {
  return POOL_LIVE(g_events, event) ? sticky() : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuEventQuery(CUevent event) {
  return POOL_LIVE(g_events, event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (ms == NULL || !POOL_LIVE(g_events, start) || !POOL_LIVE(g_events, end)) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_NOT_READY;
  *ms = (float)(end->ms - start->ms);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  if (!POOL_LIVE(g_events, event)) return CUDA_ERROR_INVALID_HANDLE;
  event->used = 0;
  return CUDA_SUCCESS;
}

/* Test kernels: host functions that run at launch on the arguments, read
 * at each parameter's offset as a real kernel's would be. */
#define MAX_KERNEL_PARAMS 4
struct CUfunc_st {
  const char* name;
  int count;
  size_t offsets[MAX_KERNEL_PARAMS];
  size_t sizes[MAX_KERNEL_PARAMS];
  void (*run)(const unsigned char* args);
};
static float* device_floats(uint64_t address, unsigned int n) {
  return device_range(address, (uint64_t)n * sizeof(float)) ? (float*)(uintptr_t)address : NULL;
}
/* add_one(float* data, unsigned int n): data[i] += 1. */
static void run_add_one(const unsigned char* args) {
  uint64_t data;
  unsigned int n;
  memcpy(&data, args, 8);
  memcpy(&n, args + 8, 4);
  float* p = device_floats(data, n);
  if (p == NULL) {
    fault();
    return;
  }
  for (unsigned int i = 0; i < n; ++i) p[i] += 1.0f;
}
/* saxpy(float a, const float* x, float* y, unsigned int n): y = a x + y. */
static void run_saxpy(const unsigned char* args) {
  float a;
  uint64_t x;
  uint64_t y;
  unsigned int n;
  memcpy(&a, args, 4);
  memcpy(&x, args + 8, 8);
  memcpy(&y, args + 16, 8);
  memcpy(&n, args + 24, 4);
  float* px = device_floats(x, n);
  float* py = device_floats(y, n);
  if (px == NULL || py == NULL) {
    fault();
    return;
  }
  for (unsigned int i = 0; i < n; ++i) py[i] = a * px[i] + py[i];
}
/* fault(): faults, as a kernel that reads a bad address does. */
static void run_fault(const unsigned char* args) {
  (void)args;
  fault();
}
static struct CUfunc_st g_kernels[] = {
    {"add_one", 2, {0, 8}, {8, 4}, run_add_one},
    {"saxpy", 4, {0, 8, 16, 24}, {4, 8, 8, 4}, run_saxpy},
    {"fault", 0, {0}, {0}, run_fault},
};
#define KERNEL_COUNT (sizeof(g_kernels) / sizeof(g_kernels[0]))
static const char kModuleText[] = "yonder-test-module";
static int known_kernel(CUfunction f) {
  for (size_t i = 0; i < KERNEL_COUNT; ++i) {
    if (f == &g_kernels[i]) return 1;
  }
  return 0;
}
EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
  /* Our marker, or PTX text (whose entries name the kernels above). */
  if (strncmp((const char*)image, kModuleText, sizeof(kModuleText) - 1) != 0 &&
      strncmp((const char*)image, ".version", 8) != 0) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  POOL_TAKE(g_modules, module);
  return *module != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuModuleUnload(CUmodule module) {
  if (!POOL_LIVE(g_modules, module)) return CUDA_ERROR_INVALID_HANDLE;
  if (module->counter != 0) give(module->counter);
  module->used = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* address, size_t* bytes, CUmodule module, const char* name) {
  if (name == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!POOL_LIVE(g_modules, module)) return CUDA_ERROR_INVALID_HANDLE;
  if (strcmp(name, "yonder_counter") != 0) return CUDA_ERROR_NOT_FOUND;
  if (module->counter == 0) { /* made at its first lookup: modules that never ask cost nothing */
    CUresult r = take(&module->counter, 4);
    if (r != CUDA_SUCCESS) return r;
  }
  if (address != NULL) *address = module->counter;
  if (bytes != NULL) *bytes = 4;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (function == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!POOL_LIVE(g_modules, module)) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < KERNEL_COUNT; ++i) {
    if (strcmp(g_kernels[i].name, name) == 0) {
      *function = &g_kernels[i];
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}
EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  if (value == NULL || !known_kernel(function)) return CUDA_ERROR_INVALID_HANDLE;
  *value = attribute == 0 ? 1024 : 0; /* 0: max threads per block */
  return CUDA_SUCCESS;
}
EXPORT CUresult cuFuncGetParamInfo(CUfunction function, size_t index, size_t* offset, size_t* size) {
  if (!known_kernel(function) || offset == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= (size_t)function->count) return CUDA_ERROR_INVALID_VALUE;
  *offset = function->offsets[index];
  if (size != NULL) *size = function->sizes[index];
  return CUDA_SUCCESS;
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function, int block_size,
                                                            size_t shared) {
  (void)shared;
  if (blocks == NULL || !known_kernel(function) || block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  *blocks = 2048 / block_size > 0 ? 2048 / block_size : 1;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                               CUstream stream, void** params, void** extra) {
  (void)shared;
  (void)stream;
  if (!known_kernel(function)) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned char args[64] = {0};
  if (params != NULL) {
    for (int i = 0; i < function->count; ++i) memcpy(args + function->offsets[i], params[i], function->sizes[i]);
  } else if (extra != NULL) {
    const void* buffer = NULL;
    size_t size = 0;
    for (int i = 0; extra[i] != (void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_END && i < 8; i += 2) {
      if (extra[i] == (void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
      if (extra[i] == (void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(const size_t*)extra[i + 1];
    }
    if (buffer == NULL || size > sizeof(args)) return CUDA_ERROR_INVALID_VALUE;
    memcpy(args, buffer, size);
  } else if (function->count > 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  function->run(args);
  return CUDA_SUCCESS;
}

/* What the driver-API samples use besides, for programs linked against this
 * double (remote CUDA's stand-in answers these itself). */
static __thread CUcontext t_below[16];
static __thread int t_depth;
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (ctx == NULL || t_depth == 16) return CUDA_ERROR_INVALID_VALUE;
  t_below[t_depth++] = t_current;
  t_current = ctx;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (t_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != NULL) *ctx = t_current;
  t_current = t_depth > 0 ? t_below[--t_depth] : NULL;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice device) {
  if (major == NULL || minor == NULL || device != 0) return CUDA_ERROR_INVALID_VALUE;
  *major = 8;
  *minor = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemHostAlloc(void** host, size_t bytes, unsigned int flags) {
  (void)flags;
  if (host == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return posix_memalign(host, 4096, bytes) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuMemAllocHost_v2(void** host, size_t bytes) { return cuMemHostAlloc(host, bytes, 0); }
EXPORT CUresult cuMemFreeHost(void* host) {
  free(host);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemHostRegister_v2(void* host, size_t bytes, unsigned int flags) {
  (void)flags;
  return host != NULL && bytes != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuMemHostUnregister(void* host) { return host != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int options, CUjit_option* names,
                                   void** values) {
  (void)options;
  (void)names;
  (void)values;
  return cuModuleLoadData(module, image);
}
EXPORT CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (module == NULL || path == NULL) return CUDA_ERROR_INVALID_VALUE;
  FILE* f = fopen(path, "rb");
  if (f == NULL) return CUDA_ERROR_FILE_NOT_FOUND;
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return cuModuleLoadData(module, text);
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
