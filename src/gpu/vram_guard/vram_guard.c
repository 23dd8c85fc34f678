/* The VRAM guard: a small library the provider preloads into a job's
 * processes (LD_PRELOAD, set by the provider, not the consumer) so that the
 * job's GPU allocations stay within its budget. Issue 26's first layer of
 * enforcement; docs/architecture.md ("GPU shares") says which layer catches
 * what.
 *
 * Each allocation entry point of the CUDA driver API that the job reaches
 * (memory, pitched, managed, async and pool allocations, cuMemCreate, and
 * 2D and 3D arrays; not yet mipmapped arrays) is wrapped: the bytes are charged to the job's ledger (ledger.h, shared by
 * all its processes) before the driver is called, and refused with
 * CUDA_ERROR_OUT_OF_MEMORY when they would take the job past its budget;
 * frees credit them back. cuMemGetInfo, and NVML's nvmlDeviceGetMemoryInfo
 * (and _v2), report the budget as the total and what is left of it as free,
 * so frameworks that size their caches from them (PyTorch) and nvidia-smi
 * in the container see the share, not the device. The entry points are reached three ways, and each
 * leads here:
 *   - a program linked against libcuda.so.1: the preload's symbols come
 *     first;
 *   - dlopen("libcuda.so.1") then dlsym (how the CUDA runtime and PyTorch
 *     load the driver, which a preload alone does not see): dlsym is
 *     wrapped too and hands out the guard's functions for the names below;
 *   - cuGetProcAddress (a statically linked CUDA runtime asks the driver
 *     for every entry point by base name and version): wrapped, mapping the
 *     base name and version to the guard's function, cuGetProcAddress
 *     itself included.
 * Environment: YONDER_VRAM_LEDGER, the ledger's path. Unset: the guard
 * passes everything through (a job without a budget). Set but unusable:
 * every allocation is refused, and why is said once on stderr.
 *
 * Plain C, libc and libdl only; the driver is opened by name
 * (libcuda.so.1), as the runtime opens it.
 *
 * Known limits: a library that itself calls dlsym(RTLD_NEXT, ...) gets
 * what follows the guard, not what follows it (the caller glibc sees is
 * the guard); the guard's dlsym is bound to glibc 2.34's symbol version
 * first (2.2.5 as a fallback), so it needs a glibc of 2.34 or later in the
 * container as built here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/cuda/driver_api.h"
#include "gpu/vram_guard/ledger.h"

#define EXPORT __attribute__((visibility("default")))
#define PTDS_FLAG 2 /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
#define MIB (1024.0 * 1024.0)

typedef void* (*dlsym_fn)(void*, const char*);

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dlsym_fn g_real_dlsym;
static void* g_driver;
static enum { GUARD_PASS, GUARD_ON, GUARD_REFUSE } g_mode = GUARD_PASS;
static struct yonder_vram_open g_ledger = {-1, NULL};
static char g_refuse_why[512];

/* ---- what each allocation holds, to credit it back at its free ---- */

#define TABLE_SLOTS (1u << 16)
struct held {
  uint64_t key; /* a device pointer or an allocation handle; 0: empty */
  uint64_t bytes;
  uint8_t kind; /* 1: pointer, 2: allocation handle, 3: deleted, 4: array */
};
static struct held* g_table;
static pthread_mutex_t g_table_mu = PTHREAD_MUTEX_INITIALIZER;

static uint32_t slot_hash(uint64_t key, uint8_t kind) {
  key ^= (uint64_t)kind << 56;
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return (uint32_t)key & (TABLE_SLOTS - 1);
}

static void remember(uint64_t key, uint8_t kind, uint64_t bytes) {
  pthread_mutex_lock(&g_table_mu);
  if (g_table != NULL) {
    for (uint32_t i = slot_hash(key, kind), n = 0; n < TABLE_SLOTS; ++n, i = (i + 1) & (TABLE_SLOTS - 1)) {
      if (g_table[i].key == 0 || g_table[i].kind == 3) {
        g_table[i].key = key;
        g_table[i].kind = kind;
        g_table[i].bytes = bytes;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_table_mu);
}

/* The bytes `key` held (0 if unknown), forgotten. */
static uint64_t forget(uint64_t key, uint8_t kind) {
  uint64_t bytes = 0;
  pthread_mutex_lock(&g_table_mu);
  if (g_table != NULL) {
    for (uint32_t i = slot_hash(key, kind), n = 0; n < TABLE_SLOTS; ++n, i = (i + 1) & (TABLE_SLOTS - 1)) {
      if (g_table[i].key == 0 && g_table[i].kind == 0) break;
      if (g_table[i].key == key && g_table[i].kind == kind) {
        bytes = g_table[i].bytes;
        g_table[i].kind = 3;
        g_table[i].key = 0;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_table_mu);
  return bytes;
}

/* ---- start-up ---- */

/* The real dlsym, found apart from the rest: the dlsym below runs for every
 * lookup in the process (the loader's and other libraries' too), so it must
 * not open the driver, which may itself look symbols up while it loads. */
static pthread_once_t g_dlsym_once = PTHREAD_ONCE_INIT;

static void find_real_dlsym(void) {
  g_real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (g_real_dlsym == NULL) g_real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

static void init(void) {
  pthread_once(&g_dlsym_once, find_real_dlsym);
  g_driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  const char* path = getenv("YONDER_VRAM_LEDGER");
  if (path == NULL || path[0] == '\0') return;
  void* table = mmap(NULL, sizeof(struct held) * TABLE_SLOTS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  g_table = table == MAP_FAILED ? NULL : (struct held*)table;
  int rc = yonder_vram_ledger_open(path, &g_ledger);
  if (rc != 0 || g_table == NULL) {
    g_mode = GUARD_REFUSE;
    snprintf(g_refuse_why, sizeof g_refuse_why,
             "yonder: the job's VRAM ledger %s cannot be used (%s), so every GPU allocation is refused; the "
             "provider sets it up for each job, so tell the provider\n",
             path, rc == -EPROTO ? "not a ledger" : strerror(rc ? -rc : ENOMEM));
    return;
  }
  g_mode = GUARD_ON;
}

static void ensure_init(void) { pthread_once(&g_once, init); }

static void* real(const char* name) {
  ensure_init();
  if (g_driver == NULL || g_real_dlsym == NULL) return NULL;
  return g_real_dlsym(g_driver, name);
}

#define REAL(type, name)                          \
  static type real_##name(void) {                 \
    static type fn;                               \
    if (fn == NULL) fn = (type)real(#name);       \
    return fn;                                    \
  }
REAL(PFN_cuMemAlloc_v2, cuMemAlloc_v2)
REAL(PFN_cuMemAllocPitch_v2, cuMemAllocPitch_v2)
REAL(PFN_cuMemAllocManaged, cuMemAllocManaged)
REAL(PFN_cuMemAllocAsync, cuMemAllocAsync)
REAL(PFN_cuMemAllocAsync, cuMemAllocAsync_ptsz)
REAL(PFN_cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)
REAL(PFN_cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)
REAL(PFN_cuMemFree_v2, cuMemFree_v2)
REAL(PFN_cuMemFreeAsync, cuMemFreeAsync)
REAL(PFN_cuMemFreeAsync, cuMemFreeAsync_ptsz)
REAL(PFN_cuMemCreate, cuMemCreate)
REAL(PFN_cuMemRelease, cuMemRelease)
REAL(PFN_cuMemGetInfo_v2, cuMemGetInfo_v2)
REAL(PFN_cuArrayCreate_v2, cuArrayCreate_v2)
REAL(PFN_cuArray3DCreate_v2, cuArray3DCreate_v2)
REAL(PFN_cuArrayDestroy, cuArrayDestroy)
REAL(PFN_cuGetProcAddress, cuGetProcAddress)
REAL(PFN_cuGetProcAddress_v2, cuGetProcAddress_v2)

/* ---- the budget ---- */

static int g_told;

/* 1: `bytes` charged (or nothing to charge); 0: refused. */
static int charge(uint64_t bytes) {
  ensure_init();
  if (g_mode == GUARD_PASS) return 1;
  if (g_mode == GUARD_ON) {
    int rc = yonder_vram_ledger_charge(&g_ledger, getpid(), bytes);
    if (rc == 0) return 1;
    if (!__atomic_exchange_n(&g_told, 1, __ATOMIC_RELAXED)) {
      if (rc == -ENOSPC) {
        fprintf(stderr,
                "yonder: a GPU allocation of %.0f MiB was refused: this job runs more processes on the GPU than "
                "its VRAM ledger has places for (%d) (said once)\n",
                (double)bytes / MIB, YONDER_VRAM_LEDGER_SLOTS);
      } else {
        fprintf(stderr,
                "yonder: a GPU allocation of %.0f MiB was refused: it would take this job past its VRAM budget "
                "of %.0f MiB (its processes hold %.0f MiB); ask the provider for more with --vram, or make the "
                "program use less (said once)\n",
                (double)bytes / MIB, (double)yonder_vram_ledger_budget(&g_ledger) / MIB,
                (double)yonder_vram_ledger_used(&g_ledger) / MIB);
      }
    }
    return 0;
  }
  if (!__atomic_exchange_n(&g_told, 1, __ATOMIC_RELAXED)) fputs(g_refuse_why, stderr);
  return 0;
}

static void credit(uint64_t bytes) {
  if (g_mode == GUARD_ON && bytes > 0) yonder_vram_ledger_credit(&g_ledger, getpid(), bytes);
}

/* Charges `bytes`, calls the driver, keeps or gives back the charge. */
#define GUARDED_ALLOC(fn, dptr, bytes, ...)                   \
  do {                                                        \
    if ((fn) == NULL) return CUDA_ERROR_NOT_INITIALIZED;      \
    if (!charge(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;      \
    CUresult r_ = (fn)(__VA_ARGS__);                          \
    if (r_ != CUDA_SUCCESS) {                                 \
      credit(bytes);                                          \
      return r_;                                              \
    }                                                         \
    if (g_mode == GUARD_ON) remember(*(dptr), 1, (bytes));    \
    return r_;                                                \
  } while (0)

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  GUARDED_ALLOC(real_cuMemAlloc_v2(), dptr, bytesize, dptr, bytesize);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  GUARDED_ALLOC(real_cuMemAllocManaged(), dptr, bytesize, dptr, bytesize, flags);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  GUARDED_ALLOC(real_cuMemAllocAsync(), dptr, bytesize, dptr, bytesize, stream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  GUARDED_ALLOC(real_cuMemAllocAsync_ptsz(), dptr, bytesize, dptr, bytesize, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
  GUARDED_ALLOC(real_cuMemAllocFromPoolAsync(), dptr, bytesize, dptr, bytesize, pool, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream) {
  GUARDED_ALLOC(real_cuMemAllocFromPoolAsync_ptsz(), dptr, bytesize, dptr, bytesize, pool, stream);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                   unsigned int element_size) {
  PFN_cuMemAllocPitch_v2 fn = real_cuMemAllocPitch_v2();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  /* The pitch is the driver's choice: charge the width rounded up to 512
   * bytes first, then what the driver actually laid out. */
  uint64_t estimate = (((uint64_t)width + 511) / 512 * 512) * height;
  if (!charge(estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = fn(dptr, pitch, width, height, element_size);
  if (r != CUDA_SUCCESS) {
    credit(estimate);
    return r;
  }
  uint64_t actual = (uint64_t)*pitch * height;
  if (actual > estimate && !charge(actual - estimate)) {
    credit(estimate);
    PFN_cuMemFree_v2 free_fn = real_cuMemFree_v2();
    if (free_fn != NULL) free_fn(*dptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < estimate) credit(estimate - actual);
  if (g_mode == GUARD_ON) remember(*dptr, 1, actual);
  return r;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                            unsigned long long flags) {
  PFN_cuMemCreate fn = real_cuMemCreate();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  if (!charge(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = fn(handle, size, prop, flags);
  if (r != CUDA_SUCCESS) {
    credit(size);
    return r;
  }
  if (g_mode == GUARD_ON) remember(*handle, 2, size);
  return r;
}

/* Arrays: charged by their elements' bytes (the driver's alignment on top is
 * not counted); an extent that overflows is refused. */
static CUresult guarded_array(CUarray* handle, uint64_t bytes, CUresult (*create)(CUarray*, const void*),
                              const void* descriptor) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!charge(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = create(handle, descriptor);
  if (r != CUDA_SUCCESS) {
    credit(bytes);
    return r;
  }
  if (g_mode == GUARD_ON) remember((uint64_t)(uintptr_t)*handle, 4, bytes);
  return r;
}

static CUresult create_2d(CUarray* handle, const void* d) {
  return real_cuArrayCreate_v2()(handle, (const CUDA_ARRAY_DESCRIPTOR*)d);
}
static CUresult create_3d(CUarray* handle, const void* d) {
  return real_cuArray3DCreate_v2()(handle, (const CUDA_ARRAY3D_DESCRIPTOR*)d);
}

EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d) {
  if (real_cuArrayCreate_v2() == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  if (d == NULL || handle == NULL) return CUDA_ERROR_INVALID_VALUE;
  return guarded_array(handle, yonder_cuda_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), create_2d,
                       d);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  if (real_cuArray3DCreate_v2() == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  if (d == NULL || handle == NULL) return CUDA_ERROR_INVALID_VALUE;
  return guarded_array(handle, yonder_cuda_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels),
                       create_3d, d);
}

EXPORT CUresult cuArrayDestroy(CUarray handle) {
  PFN_cuArrayDestroy fn = real_cuArrayDestroy();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(handle);
  if (r == CUDA_SUCCESS) credit(forget((uint64_t)(uintptr_t)handle, 4));
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  PFN_cuMemFree_v2 fn = real_cuMemFree_v2();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(dptr);
  if (r == CUDA_SUCCESS) credit(forget(dptr, 1));
  return r;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  PFN_cuMemFreeAsync fn = real_cuMemFreeAsync();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(dptr, stream);
  if (r == CUDA_SUCCESS) credit(forget(dptr, 1));
  return r;
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  PFN_cuMemFreeAsync fn = real_cuMemFreeAsync_ptsz();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(dptr, stream);
  if (r == CUDA_SUCCESS) credit(forget(dptr, 1));
  return r;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  PFN_cuMemRelease fn = real_cuMemRelease();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(handle);
  if (r == CUDA_SUCCESS) credit(forget(handle, 2));
  return r;
}

EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  PFN_cuMemGetInfo_v2 fn = real_cuMemGetInfo_v2();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || g_mode == GUARD_PASS) return r;
  if (g_mode == GUARD_REFUSE) {
    *free_bytes = 0;
    *total_bytes = 0;
    return r;
  }
  uint64_t budget = yonder_vram_ledger_budget(&g_ledger);
  uint64_t used = yonder_vram_ledger_used(&g_ledger);
  uint64_t left = used >= budget ? 0 : budget - used;
  *total_bytes = (size_t)budget;
  if (*free_bytes > left) *free_bytes = (size_t)left;
  return r;
}

/* ---- NVML's view of the device's memory ---- */

static void* g_nvml;
static pthread_once_t g_nvml_once = PTHREAD_ONCE_INIT;

static void open_nvml(void) { g_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL); }

static void* real_nvml(const char* name) {
  ensure_init();
  pthread_once(&g_nvml_once, open_nvml);
  if (g_nvml == NULL || g_real_dlsym == NULL) return NULL;
  return g_real_dlsym(g_nvml, name);
}

/* What the job may see: total the budget, used what its processes hold,
 * free what is left of the budget (never more than the device has free). */
static void budget_view(unsigned long long* total, unsigned long long* free_bytes, unsigned long long* used) {
  if (g_mode == GUARD_REFUSE) {
    *total = *free_bytes = *used = 0;
    return;
  }
  uint64_t budget = yonder_vram_ledger_budget(&g_ledger);
  uint64_t held = yonder_vram_ledger_used(&g_ledger);
  uint64_t left = held >= budget ? 0 : budget - held;
  *total = budget;
  *used = held < budget ? held : budget;
  if (*free_bytes > left) *free_bytes = left;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  PFN_nvmlDeviceGetMemoryInfo fn = (PFN_nvmlDeviceGetMemoryInfo)real_nvml("nvmlDeviceGetMemoryInfo");
  if (fn == NULL) return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t r = fn(device, memory);
  if (r == NVML_SUCCESS && g_mode != GUARD_PASS) budget_view(&memory->total, &memory->free, &memory->used);
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  PFN_nvmlDeviceGetMemoryInfo_v2 fn = (PFN_nvmlDeviceGetMemoryInfo_v2)real_nvml("nvmlDeviceGetMemoryInfo_v2");
  if (fn == NULL) return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t r = fn(device, memory);
  if (r == NVML_SUCCESS && g_mode != GUARD_PASS) {
    budget_view(&memory->total, &memory->free, &memory->used);
    memory->reserved = 0;
  }
  return r;
}

/* ---- the ways in: cuGetProcAddress and dlsym ---- */

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* symbol_status);

/* The guard's function for an entry point the driver handed out by base
 * name, version and flags (`found`: what the driver returned); NULL: not
 * one the guard wraps. */
static void* wrapper_for_base(const char* base, int version, cuuint64_t flags, void* found) {
  int v2 = version >= YONDER_CUDA_V2_SINCE;
  int ptsz = (flags & PTDS_FLAG) != 0;
  if (v2 && strcmp(base, "cuMemAlloc") == 0) return (void*)cuMemAlloc_v2;
  if (v2 && strcmp(base, "cuMemAllocPitch") == 0) return (void*)cuMemAllocPitch_v2;
  if (v2 && strcmp(base, "cuMemFree") == 0) return (void*)cuMemFree_v2;
  if (v2 && strcmp(base, "cuMemGetInfo") == 0) return (void*)cuMemGetInfo_v2;
  if (v2 && strcmp(base, "cuArrayCreate") == 0) return (void*)cuArrayCreate_v2;
  if (v2 && strcmp(base, "cuArray3DCreate") == 0) return (void*)cuArray3DCreate_v2;
  if (strcmp(base, "cuArrayDestroy") == 0) return (void*)cuArrayDestroy;
  if (strcmp(base, "cuMemAllocManaged") == 0) return (void*)cuMemAllocManaged;
  if (strcmp(base, "cuMemCreate") == 0) return (void*)cuMemCreate;
  if (strcmp(base, "cuMemRelease") == 0) return (void*)cuMemRelease;
  if (strcmp(base, "cuMemAllocAsync") == 0) {
    return ptsz || found == (void*)real_cuMemAllocAsync_ptsz() ? (void*)cuMemAllocAsync_ptsz : (void*)cuMemAllocAsync;
  }
  if (strcmp(base, "cuMemAllocFromPoolAsync") == 0) {
    return ptsz || found == (void*)real_cuMemAllocFromPoolAsync_ptsz() ? (void*)cuMemAllocFromPoolAsync_ptsz
                                                                        : (void*)cuMemAllocFromPoolAsync;
  }
  if (strcmp(base, "cuMemFreeAsync") == 0) {
    return ptsz || found == (void*)real_cuMemFreeAsync_ptsz() ? (void*)cuMemFreeAsync_ptsz : (void*)cuMemFreeAsync;
  }
  if (strcmp(base, "cuGetProcAddress") == 0) {
    return version >= YONDER_CUDA_PROC_ADDRESS_V2_SINCE ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
  }
  return NULL;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  PFN_cuGetProcAddress fn = real_cuGetProcAddress();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(symbol, pfn, cuda_version, flags);
  if (r == CUDA_SUCCESS && pfn != NULL && *pfn != NULL && symbol != NULL) {
    void* w = wrapper_for_base(symbol, cuda_version, flags, *pfn);
    if (w != NULL) *pfn = w;
  }
  return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* symbol_status) {
  PFN_cuGetProcAddress_v2 fn = real_cuGetProcAddress_v2();
  if (fn == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = fn(symbol, pfn, cuda_version, flags, symbol_status);
  if (r == CUDA_SUCCESS && pfn != NULL && *pfn != NULL && symbol != NULL) {
    void* w = wrapper_for_base(symbol, cuda_version, flags, *pfn);
    if (w != NULL) *pfn = w;
  }
  return r;
}

/* The guard's function for an exported (versioned) name; NULL: not wrapped. */
static void* wrapper_for_export(const char* name) {
  static const struct {
    const char* name;
    void* fn;
  } kWrapped[] = {
      {"cuMemAlloc_v2", (void*)cuMemAlloc_v2},
      {"cuMemAllocPitch_v2", (void*)cuMemAllocPitch_v2},
      {"cuMemAllocManaged", (void*)cuMemAllocManaged},
      {"cuMemAllocAsync", (void*)cuMemAllocAsync},
      {"cuMemAllocAsync_ptsz", (void*)cuMemAllocAsync_ptsz},
      {"cuMemAllocFromPoolAsync", (void*)cuMemAllocFromPoolAsync},
      {"cuMemAllocFromPoolAsync_ptsz", (void*)cuMemAllocFromPoolAsync_ptsz},
      {"cuMemFree_v2", (void*)cuMemFree_v2},
      {"cuMemFreeAsync", (void*)cuMemFreeAsync},
      {"cuMemFreeAsync_ptsz", (void*)cuMemFreeAsync_ptsz},
      {"cuMemCreate", (void*)cuMemCreate},
      {"cuMemRelease", (void*)cuMemRelease},
      {"cuMemGetInfo_v2", (void*)cuMemGetInfo_v2},
      {"cuArrayCreate_v2", (void*)cuArrayCreate_v2},
      {"cuArray3DCreate_v2", (void*)cuArray3DCreate_v2},
      {"cuArrayDestroy", (void*)cuArrayDestroy},
      {"cuGetProcAddress", (void*)cuGetProcAddress},
      {"cuGetProcAddress_v2", (void*)cuGetProcAddress_v2},
      {"nvmlDeviceGetMemoryInfo", (void*)nvmlDeviceGetMemoryInfo},
      {"nvmlDeviceGetMemoryInfo_v2", (void*)nvmlDeviceGetMemoryInfo_v2},
  };
  if (name == NULL || (strncmp(name, "cu", 2) != 0 && strncmp(name, "nvml", 4) != 0)) return NULL;
  for (size_t i = 0; i < sizeof kWrapped / sizeof kWrapped[0]; ++i) {
    if (strcmp(name, kWrapped[i].name) == 0) return kWrapped[i].fn;
  }
  return NULL;
}

EXPORT void* dlsym(void* handle, const char* name) {
  pthread_once(&g_dlsym_once, find_real_dlsym);
  if (g_real_dlsym == NULL) return NULL;
  void* found = g_real_dlsym(handle, name);
  if (found == NULL) return NULL;
  void* w = wrapper_for_export(name);
  return w != NULL ? w : found;
}
