/* A CUDA driver API client for the VRAM guard's tests: it reaches the
 * allocation entry points each way a real program does (linked against
 * libcuda.so.1; dlopen and dlsym, as the CUDA runtime loads the driver;
 * cuGetProcAddress, as a statically linked runtime does) and prints one
 * line per operation, so the test reads what the driver (here its test
 * double) or the guard answered.
 *
 *   vram_probe OP [ARG...] ...
 *     ctx               device 0's primary context made current (a real driver needs one)
 *     alloc MB          cuMemAlloc_v2, linked
 *     dlsym_alloc MB    dlsym(libcuda.so.1, "cuMemAlloc_v2")
 *     proc_alloc MB     cuGetProcAddress("cuGetProcAddress", 12000) -> _v2, then "cuMemAlloc" at 12000
 *     async MB          cuMemAllocAsync_ptsz through cuGetProcAddress_v2 with the per-thread stream flag
 *     managed MB        cuMemAllocManaged, linked
 *     create MB         cuMemCreate, linked
 *     pitch W H         cuMemAllocPitch_v2 (W bytes wide, H rows), linked
 *     array W H         cuArrayCreate_v2 of floats, linked
 *     array3d W H D     cuArray3DCreate_v2 of floats, through cuGetProcAddress_v2
 *     info              cuMemGetInfo_v2, linked: "info free=MB total=MB"
 *     nvml              nvmlDeviceGetMemoryInfo of device 0, dlopen'd: "nvml total=MB used=MB free=MB"
 *     free_all          frees everything this process allocated
 *     hold              reads stdin to its end (the test closes it)
 * Each line: "OP ARG ok" or "OP ARG error CODE". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/cuda/driver_api.h"

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes);
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags);
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int element);
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);
CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d);
CUresult cuArrayDestroy(CUarray handle);

#define MB (1024ULL * 1024ULL)

static struct {
  uint64_t value;
  int handle; /* 0: a pointer, 1: an allocation handle, 2: an array */
} held[256];
static int n_held;

static void keep(uint64_t value, int handle) {
  if (n_held < 256) {
    held[n_held].value = value;
    held[n_held].handle = handle;
    ++n_held;
  }
}

static void report(const char* op, const char* arg, CUresult r) {
  if (r == CUDA_SUCCESS) {
    printf("%s %s ok\n", op, arg);
  } else {
    printf("%s %s error %d\n", op, arg, r);
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == NULL) {
    fprintf(stderr, "vram_probe: %s\n", dlerror());
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const char* op = argv[i];
    const char* arg = i + 1 < argc ? argv[i + 1] : "";
    uint64_t bytes = (uint64_t)strtoull(arg, NULL, 10) * MB;
    CUdeviceptr p = 0;
    if (strcmp(op, "ctx") == 0) {
      /* Device 0's primary context, current: what a real driver needs before
       * it allocates (scripts/gpu-check.sh); the double accepts it. */
      CUdevice dev = 0;
      CUcontext ctx = NULL;
      CUresult r = cuDeviceGet(&dev, 0);
      if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
      report(op, "0", r);
    } else if (strcmp(op, "alloc") == 0) {
      CUresult r = cuMemAlloc_v2(&p, bytes);
      if (r == CUDA_SUCCESS) keep(p, 0);
      report(op, arg, r);
      ++i;
    } else if (strcmp(op, "dlsym_alloc") == 0) {
      PFN_cuMemAlloc_v2 fn = (PFN_cuMemAlloc_v2)dlsym(driver, "cuMemAlloc_v2");
      CUresult r = fn(&p, bytes);
      if (r == CUDA_SUCCESS) keep(p, 0);
      report(op, arg, r);
      ++i;
    } else if (strcmp(op, "proc_alloc") == 0 || strcmp(op, "async") == 0) {
      PFN_cuGetProcAddress v1 = (PFN_cuGetProcAddress)dlsym(driver, "cuGetProcAddress");
      PFN_cuGetProcAddress_v2 v2 = NULL;
      if (v1 == NULL || v1("cuGetProcAddress", (void**)&v2, 12000, 0) != CUDA_SUCCESS || v2 == NULL) return 3;
      CUresult r;
      if (strcmp(op, "async") == 0) {
        PFN_cuMemAllocAsync fn = NULL;
        CUdriverProcAddressQueryResult st;
        if (v2("cuMemAllocAsync", (void**)&fn, 12000, 2, &st) != CUDA_SUCCESS || fn == NULL) return 3;
        r = fn(&p, bytes, NULL);
      } else {
        PFN_cuMemAlloc_v2 fn = NULL;
        CUdriverProcAddressQueryResult st;
        if (v2("cuMemAlloc", (void**)&fn, 12000, 0, &st) != CUDA_SUCCESS || fn == NULL) return 3;
        r = fn(&p, bytes);
      }
      if (r == CUDA_SUCCESS) keep(p, 0);
      report(op, arg, r);
      ++i;
    } else if (strcmp(op, "managed") == 0) {
      CUresult r = cuMemAllocManaged(&p, bytes, 1);
      if (r == CUDA_SUCCESS) keep(p, 0);
      report(op, arg, r);
      ++i;
    } else if (strcmp(op, "create") == 0) {
      CUmemGenericAllocationHandle h = 0;
      CUresult r = cuMemCreate(&h, bytes, NULL, 0);
      if (r == CUDA_SUCCESS) keep(h, 1);
      report(op, arg, r);
      ++i;
    } else if (strcmp(op, "pitch") == 0 && i + 2 < argc) {
      size_t pitch = 0;
      CUresult r = cuMemAllocPitch_v2(&p, &pitch, strtoull(argv[i + 1], NULL, 10), strtoull(argv[i + 2], NULL, 10), 4);
      if (r == CUDA_SUCCESS) keep(p, 0);
      report(op, arg, r);
      i += 2;
    } else if (strcmp(op, "array") == 0 && i + 2 < argc) {
      CUDA_ARRAY_DESCRIPTOR d = {strtoull(argv[i + 1], NULL, 10), strtoull(argv[i + 2], NULL, 10), CU_AD_FORMAT_FLOAT,
                                 1};
      CUarray a = NULL;
      CUresult r = cuArrayCreate_v2(&a, &d);
      if (r == CUDA_SUCCESS) keep((uint64_t)(uintptr_t)a, 2);
      report(op, arg, r);
      i += 2;
    } else if (strcmp(op, "array3d") == 0 && i + 3 < argc) {
      PFN_cuGetProcAddress v1 = (PFN_cuGetProcAddress)dlsym(driver, "cuGetProcAddress");
      PFN_cuGetProcAddress_v2 v2 = NULL;
      PFN_cuArray3DCreate_v2 fn = NULL;
      CUdriverProcAddressQueryResult st;
      if (v1 == NULL || v1("cuGetProcAddress", (void**)&v2, 12000, 0) != CUDA_SUCCESS || v2 == NULL ||
          v2("cuArray3DCreate", (void**)&fn, 12000, 0, &st) != CUDA_SUCCESS || fn == NULL) {
        return 3;
      }
      CUDA_ARRAY3D_DESCRIPTOR d = {strtoull(argv[i + 1], NULL, 10), strtoull(argv[i + 2], NULL, 10),
                                   strtoull(argv[i + 3], NULL, 10), CU_AD_FORMAT_FLOAT, 1, 0};
      CUarray a = NULL;
      CUresult r = fn(&a, &d);
      if (r == CUDA_SUCCESS) keep((uint64_t)(uintptr_t)a, 2);
      report(op, arg, r);
      i += 3;
    } else if (strcmp(op, "info") == 0) {
      size_t free_bytes = 0, total = 0;
      if (cuMemGetInfo_v2(&free_bytes, &total) != CUDA_SUCCESS) return 3;
      printf("info free=%llu total=%llu\n", (unsigned long long)(free_bytes / MB), (unsigned long long)(total / MB));
      fflush(stdout);
    } else if (strcmp(op, "nvml") == 0) {
      void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (nvml == NULL) return 4;
      nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(nvml, "nvmlInit_v2");
      nvmlReturn_t (*get)(unsigned int, nvmlDevice_t*) =
          (nvmlReturn_t(*)(unsigned int, nvmlDevice_t*))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
      PFN_nvmlDeviceGetMemoryInfo info = (PFN_nvmlDeviceGetMemoryInfo)dlsym(nvml, "nvmlDeviceGetMemoryInfo");
      nvmlDevice_t device = NULL;
      nvmlMemory_t memory;
      if (init == NULL || get == NULL || info == NULL || init() != NVML_SUCCESS || get(0, &device) != NVML_SUCCESS ||
          info(device, &memory) != NVML_SUCCESS) {
        return 4;
      }
      printf("nvml total=%llu used=%llu free=%llu\n", memory.total / MB, memory.used / MB, memory.free / MB);
      fflush(stdout);
    } else if (strcmp(op, "free_all") == 0) {
      int bad = 0;
      for (int k = 0; k < n_held; ++k) {
        CUresult r = held[k].handle == 1   ? cuMemRelease(held[k].value)
                     : held[k].handle == 2 ? cuArrayDestroy((CUarray)(uintptr_t)held[k].value)
                                           : cuMemFree_v2(held[k].value);
        bad = bad || r != CUDA_SUCCESS;
      }
      n_held = 0;
      report(op, "-", bad ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    } else if (strcmp(op, "hold") == 0) {
      char buf[256];
      while (read(0, buf, sizeof buf) > 0) {
      }
    } else {
      fprintf(stderr, "vram_probe: unknown operation %s\n", op);
      return 2;
    }
  }
  return 0;
}
