/* A CUDA driver API program for remote CUDA's tests: linked against
 * libcuda.so.1 like any driver-API program, and run with the stand-in
 * (src/gpu/remote) first on the library path, so every call below goes to
 * a worker, which runs it on the driver's TEST DOUBLE and its test kernels
 * (tests/gpu/vram_guard/fake_libcuda.c). Each scenario checks what it gets
 * back and prints one line per check; the exit status is 0 only when every
 * check held.
 *
 *   cuda_program session      device queries, context, allocations, copies both ways (a 3 MiB one
 *                             in chunks), memsets, a module, launches (arguments by pointer and as
 *                             a packed buffer), a stream and events, frees
 *   cuda_program deferred     a launch that faults is accepted; the next synchronise reports it
 *   cuda_program bad_handle   a stream the worker never handed out
 *   cuda_program threads      four threads, each with the context made current itself, launching on its own data
 *   cuda_program alloc MB     one allocation: prints "alloc MB ok" or "alloc MB error CODE"
 *   cuda_program fork         a child forked after CUDA began cannot use it; the parent still can
 *   cuda_program init         cuInit only: prints its result
 *   cuda_program wait_for F   a call ("before RESULT COUNT"), then, once file F exists, another
 *                             ("after RESULT"): a session cut in between shows here
 *   cuda_program launches N   N fire-and-forget launches, then a synchronise (for the bench)
 *   cuda_program samples DIR  what NVIDIA's driver-API samples do besides: a context of their own
 *                             (cuCtxCreate, push, pop, destroy), a module from a file in DIR
 *                             (cuModuleLoad), a module's global, pinned and registered host memory,
 *                             the other memsets and the stream-ordered copy and memsets */
#define _DEFAULT_SOURCE /* usleep */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/cuda/driver_api.h"
#include "gpu/remote/test_kernels_ptx.h"

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDeviceGetName(char* name, int length, CUdevice device);
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device);
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext* ctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count);
CUresult cuStreamCreate(CUstream* stream, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuEventCreate(CUevent* event, unsigned int flags);
CUresult cuEventRecord(CUevent event, CUstream stream);
CUresult cuEventSynchronize(CUevent event);
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end);
CUresult cuEventDestroy_v2(CUevent event);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleUnload(CUmodule module);
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name);
CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice device);
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice device);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext* ctx);
CUresult cuModuleLoad(CUmodule* module, const char* path);
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int options, CUjit_option* names,
                            void** values);
CUresult cuModuleGetGlobal_v2(CUdeviceptr* address, size_t* bytes, CUmodule module, const char* name);
CUresult cuMemAllocHost_v2(void** host, size_t bytes);
CUresult cuMemHostAlloc(void** host, size_t bytes, unsigned int flags);
CUresult cuMemFreeHost(void* host);
CUresult cuMemHostRegister_v2(void* host, size_t bytes, unsigned int flags);
CUresult cuMemHostUnregister(void* host);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count);
CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, size_t count);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params,
                        void** extra);

static int g_failures;



static void check(int ok, const char* what, CUresult r) {
  printf("%s %s (%d)\n", what, ok ? "ok" : "FAILED", r);
  if (!ok) __atomic_fetch_add(&g_failures, 1, __ATOMIC_RELAXED);
}
#define EXPECT_OK(call) \
  do {                  \
    CUresult r_ = (call); \
    check(r_ == CUDA_SUCCESS, #call, r_); \
  } while (0)

static CUcontext start(void) {
  CUdevice device = -1;
  CUcontext ctx = NULL;
  EXPECT_OK(cuInit(0));
  EXPECT_OK(cuDeviceGet(&device, 0));
  EXPECT_OK(cuDevicePrimaryCtxRetain(&ctx, device));
  EXPECT_OK(cuCtxSetCurrent(ctx));
  return ctx;
}

static int session(void) {
  CUcontext ctx = start();
  CUcontext current = NULL;
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(current == ctx, "the current context is the one set", 0);
  int count = 0;
  EXPECT_OK(cuDeviceGetCount(&count));
  check(count == 1, "one device", count);
  char name[64] = {0};
  EXPECT_OK(cuDeviceGetName(name, sizeof name, 0));
  int fake = strstr(name, "FAKE") != NULL;
  printf("device: %s\n", name);
  size_t total = 0;
  EXPECT_OK(cuDeviceTotalMem_v2(&total, 0));
  int sms = 0;
  EXPECT_OK(cuDeviceGetAttribute(&sms, 16, 0));
  printf("memory: %zu MiB, multiprocessors: %d\n", total >> 20, sms);
  if (fake) {
    check(total == (16ULL << 30), "the test double's 16 GiB", 0);
    check(sms == 4, "the test double's 4 multiprocessors", sms);
  } else {
    check(total > 0 && sms > 0, "a device with memory and multiprocessors", sms);
  }

  /* Copies both ways, content checked. */
  enum { N = 1000 };
  float host[N];
  for (int i = 0; i < N; ++i) host[i] = (float)i;
  CUdeviceptr data = 0;
  EXPECT_OK(cuMemAlloc_v2(&data, sizeof host));
  EXPECT_OK(cuMemcpyHtoD_v2(data, host, sizeof host));
  float back[N];
  memset(back, 0, sizeof back);
  EXPECT_OK(cuMemcpyDtoH_v2(back, data, sizeof back));
  check(memcmp(host, back, sizeof host) == 0, "the bytes come back as sent", 0);

  /* A module and a launch with arguments by pointer: add_one(data, n). */
  CUmodule module = NULL;
  CUfunction add_one = NULL;
  CUfunction saxpy = NULL;
  EXPECT_OK(cuModuleLoadData(&module, kTestKernelsPtx));
  EXPECT_OK(cuModuleGetFunction(&add_one, module, "add_one"));
  EXPECT_OK(cuModuleGetFunction(&saxpy, module, "saxpy"));
  unsigned int n = N;
  void* args[] = {&data, &n};
  EXPECT_OK(cuLaunchKernel(add_one, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  EXPECT_OK(cuMemcpyDtoH_v2(back, data, sizeof back));
  int added = 1;
  for (int i = 0; i < N; ++i) added &= back[i] == host[i] + 1.0f;
  check(added, "add_one ran on every element", 0);

  /* On a stream, with events, arguments as a packed buffer:
   * saxpy(2, x = data, y, n) after y = 1s (a memset of 1.0f's bits). */
  CUstream stream = NULL;
  CUevent before = NULL;
  CUevent after = NULL;
  CUdeviceptr y = 0;
  EXPECT_OK(cuStreamCreate(&stream, 0));
  EXPECT_OK(cuEventCreate(&before, 0));
  EXPECT_OK(cuEventCreate(&after, 0));
  EXPECT_OK(cuMemAlloc_v2(&y, sizeof host));
  float one = 1.0f;
  unsigned int one_bits;
  memcpy(&one_bits, &one, 4);
  EXPECT_OK(cuMemsetD32_v2(y, one_bits, N));
  struct {
    float a;
    unsigned int pad;
    CUdeviceptr x;
    CUdeviceptr y;
    unsigned int n;
    unsigned int tail;
  } packed = {2.0f, 0, data, y, N, 0};
  size_t packed_size = 28;
  void* extra[] = {(void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, (void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, (void*)(uintptr_t)YONDER_CU_LAUNCH_PARAM_END};
  EXPECT_OK(cuEventRecord(before, stream));
  EXPECT_OK(cuLaunchKernel(saxpy, 4, 1, 1, 256, 1, 1, 0, stream, NULL, extra));
  EXPECT_OK(cuEventRecord(after, stream));
  float ys[N];
  EXPECT_OK(cuMemcpyDtoHAsync_v2(ys, y, sizeof ys, stream));
  EXPECT_OK(cuStreamSynchronize(stream));
  EXPECT_OK(cuEventSynchronize(after));
  int saxpy_ok = 1;
  for (int i = 0; i < N; ++i) saxpy_ok &= ys[i] == 2.0f * (host[i] + 1.0f) + 1.0f;
  check(saxpy_ok, "saxpy ran after the memset, on the stream", 0);
  float ms = -1;
  EXPECT_OK(cuEventElapsedTime(&ms, before, after));
  check(ms >= 0, "the events' elapsed time", 0);

  /* A copy larger than a chunk, both ways, through the async entry points. */
  size_t big = 3u << 20;
  unsigned char* out = malloc(big);
  unsigned char* in = malloc(big);
  for (size_t i = 0; i < big; ++i) out[i] = (unsigned char)(i * 7 + 3);
  CUdeviceptr large = 0;
  EXPECT_OK(cuMemAlloc_v2(&large, big));
  EXPECT_OK(cuMemcpyHtoDAsync_v2(large, out, big, stream));
  EXPECT_OK(cuMemcpyDtoHAsync_v2(in, large, big, stream));
  EXPECT_OK(cuStreamSynchronize(stream));
  check(memcmp(out, in, big) == 0, "3 MiB round trip in chunks", 0);
  free(out);
  free(in);

  size_t free_bytes = 0;
  size_t total_bytes = 0;
  EXPECT_OK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
  /* Exact on the test double; a real GPU's context holds memory too. */
  if (fake) check(total_bytes - free_bytes == 2 * sizeof host + big, "cuMemGetInfo counts what is held", 0);
  size_t held = total_bytes - free_bytes;
  EXPECT_OK(cuMemFree_v2(large));
  EXPECT_OK(cuMemFree_v2(y));
  EXPECT_OK(cuMemFree_v2(data));
  EXPECT_OK(cuEventDestroy_v2(before));
  EXPECT_OK(cuEventDestroy_v2(after));
  EXPECT_OK(cuStreamDestroy_v2(stream));
  EXPECT_OK(cuModuleUnload(module));
  EXPECT_OK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
  check(total_bytes - free_bytes <= held - big, "the frees gave the memory back", 0);
  if (fake) check(free_bytes == total_bytes, "everything freed", 0);
  /* The module's functions went with it: the launch is sent without
   * waiting, its refusal comes with the next call that waits. */
  EXPECT_OK(cuLaunchKernel(add_one, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  CUresult gone = cuCtxSynchronize();
  check(gone == CUDA_ERROR_INVALID_HANDLE, "a function of an unloaded module is refused", gone);
  return g_failures == 0 ? 0 : 1;
}

static int deferred(void) {
  start();
  static const char image[] = "yonder-test-module";
  CUmodule module = NULL;
  CUfunction fault = NULL;
  EXPECT_OK(cuModuleLoadData(&module, image));
  EXPECT_OK(cuModuleGetFunction(&fault, module, "fault"));
  EXPECT_OK(cuLaunchKernel(fault, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CUresult r = cuCtxSynchronize();
  check(r == CUDA_ERROR_LAUNCH_FAILED, "the fault surfaces at the next synchronise", r);
  r = cuCtxSynchronize();
  check(r == CUDA_SUCCESS, "and only there", r);
  /* A fire-and-forget copy to memory nobody allocated: accepted here, its
   * failure reported by the next call that waits. */
  float value = 1.0f;
  r = cuMemcpyHtoD_v2((CUdeviceptr)0xdead0000, &value, sizeof value);
  check(r == CUDA_SUCCESS, "a copy to a bad address is sent without waiting", r);
  int count = 0;
  r = cuDeviceGetCount(&count);
  check(r == CUDA_ERROR_INVALID_VALUE, "its failure surfaces at the next call that waits", r);
  r = cuDeviceGetCount(&count);
  check(r == CUDA_SUCCESS && count == 1, "once", r);
  return g_failures == 0 ? 0 : 1;
}

static int bad_handle(void) {
  start();
  CUresult r = cuStreamSynchronize((CUstream)(uintptr_t)0x9999);
  check(r == CUDA_ERROR_INVALID_HANDLE, "a stream the worker never handed out", r);
  return g_failures == 0 ? 0 : 1;
}

/* Threads sharing the session: each makes the context current itself (the
 * current context is per thread), and their calls interleave. */
enum { kThreads = 4, kThreadFloats = 4096, kThreadLaunches = 20 };
static CUcontext g_ctx;
static CUfunction g_add_one;
static void* thread_body(void* arg) {
  long id = (long)arg;
  CUcontext current = (CUcontext)1;
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(current == NULL, "a new thread has no current context", 0);
  EXPECT_OK(cuCtxSetCurrent(g_ctx));
  static __thread float values[kThreadFloats];
  for (int i = 0; i < kThreadFloats; ++i) values[i] = (float)(id * 1000 + i);
  CUdeviceptr data = 0;
  EXPECT_OK(cuMemAlloc_v2(&data, sizeof values));
  EXPECT_OK(cuMemcpyHtoD_v2(data, values, sizeof values));
  unsigned int n = kThreadFloats;
  void* args[] = {&data, &n};
  for (int k = 0; k < kThreadLaunches; ++k) EXPECT_OK(cuLaunchKernel(g_add_one, 16, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  EXPECT_OK(cuMemcpyDtoH_v2(values, data, sizeof values));
  int ok = 1;
  for (int i = 0; i < kThreadFloats; ++i) ok &= values[i] == (float)(id * 1000 + i + kThreadLaunches);
  check(ok, "a thread's launches ran on its own data", (CUresult)id);
  EXPECT_OK(cuMemFree_v2(data));
  return NULL;
}
static int threads(void) {
  g_ctx = start();
  CUmodule module = NULL;
  EXPECT_OK(cuModuleLoadData(&module, kTestKernelsPtx));
  EXPECT_OK(cuModuleGetFunction(&g_add_one, module, "add_one"));
  pthread_t t[kThreads];
  for (long i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, thread_body, (void*)i);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  return g_failures == 0 ? 0 : 1;
}

static int launches(long count) {
  start();
  CUmodule module = NULL;
  CUfunction add_one = NULL;
  CUdeviceptr data = 0;
  EXPECT_OK(cuModuleLoadData(&module, kTestKernelsPtx));
  EXPECT_OK(cuModuleGetFunction(&add_one, module, "add_one"));
  EXPECT_OK(cuMemAlloc_v2(&data, 4));
  unsigned int n = 1;
  void* args[] = {&data, &n};
  for (long i = 0; i < count; ++i) {
    CUresult r = cuLaunchKernel(add_one, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
    if (r != CUDA_SUCCESS) check(0, "launch", r);
  }
  EXPECT_OK(cuCtxSynchronize());
  float value = 0;
  EXPECT_OK(cuMemcpyDtoH_v2(&value, data, 4));
  check(value == (float)count, "every launch ran", 0);
  return g_failures == 0 ? 0 : 1;
}

static int samples(const char* dir) {
  CUdevice device = -1;
  EXPECT_OK(cuInit(0));
  EXPECT_OK(cuDeviceGet(&device, 0));
  int major = 0, minor = -1;
  EXPECT_OK(cuDeviceComputeCapability(&major, &minor, device));
  check(major > 0 && minor >= 0, "a compute capability", major);

  /* A context of the program's own, current once made; push and pop. */
  CUcontext ctx = NULL, current = NULL, popped = NULL;
  EXPECT_OK(cuCtxCreate_v2(&ctx, 0, device));
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(ctx != NULL && current == ctx, "the new context is current", 0);
  EXPECT_OK(cuCtxPopCurrent_v2(&popped));
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(popped == ctx && current == NULL, "popped, nothing is current", 0);
  EXPECT_OK(cuCtxPushCurrent_v2(ctx));
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(current == ctx, "pushed back, current again", 0);

  /* A module from a file, and its global. */
  char path[4096];
  snprintf(path, sizeof path, "%s/kernels.ptx", dir);
  FILE* f = fopen(path, "w");
  check(f != NULL && fputs(kTestKernelsPtx, f) >= 0 && fclose(f) == 0, "the PTX file written", 0);
  CUmodule module = NULL;
  CUresult missing = cuModuleLoad(&module, "/nonexistent/kernels.ptx");
  check(missing == CUDA_ERROR_FILE_NOT_FOUND, "a missing module file is CUDA_ERROR_FILE_NOT_FOUND", missing);
  EXPECT_OK(cuModuleLoad(&module, path));
  CUdeviceptr counter = 0;
  size_t counter_bytes = 0;
  EXPECT_OK(cuModuleGetGlobal_v2(&counter, &counter_bytes, module, "yonder_counter"));
  check(counter != 0 && counter_bytes == 4, "the global's address and size", (CUresult)counter_bytes);
  CUdeviceptr again = 0;
  EXPECT_OK(cuModuleGetGlobal_v2(&again, NULL, module, "yonder_counter"));
  check(again == counter, "the size may be left out", 0);
  CUresult unknown = cuModuleGetGlobal_v2(&again, NULL, module, "no_such_global");
  check(unknown == CUDA_ERROR_NOT_FOUND, "an unknown global is CUDA_ERROR_NOT_FOUND", unknown);
  unsigned int value = 1;
  EXPECT_OK(cuMemcpyDtoH_v2(&value, counter, 4));
  check(value == 0, "the global starts at zero", (CUresult)value);
  EXPECT_OK(cuMemsetD32_v2(counter, 0xfeedu, 1));
  EXPECT_OK(cuMemcpyDtoH_v2(&value, counter, 4));
  check(value == 0xfeedu, "the global written and read back", 0);
  CUmodule module_ex = NULL;
  EXPECT_OK(cuModuleLoadDataEx(&module_ex, kTestKernelsPtx, 0, NULL, NULL));
  EXPECT_OK(cuModuleUnload(module_ex));

  /* Pinned host memory through copies on a stream; registered memory. */
  enum { N = 4096 };
  unsigned char* pinned = NULL;
  EXPECT_OK(cuMemAllocHost_v2((void**)&pinned, N));
  check(pinned != NULL && ((uintptr_t)pinned % 4096) == 0, "pinned memory, page-aligned", 0);
  for (int i = 0; i < N; ++i) pinned[i] = (unsigned char)(i * 7);
  CUstream stream = NULL;
  EXPECT_OK(cuStreamCreate(&stream, 0));
  CUdeviceptr a = 0, b = 0;
  EXPECT_OK(cuMemAlloc_v2(&a, N));
  EXPECT_OK(cuMemAlloc_v2(&b, N));
  EXPECT_OK(cuMemcpyHtoDAsync_v2(a, pinned, N, stream));
  EXPECT_OK(cuMemcpyDtoDAsync_v2(b, a, N, stream));
  unsigned char* registered = malloc(N);
  EXPECT_OK(cuMemHostRegister_v2(registered, N, 0));
  CUresult twice = cuMemHostRegister_v2(registered, N, 0);
  check(twice == 712, "registering twice is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", twice);
  EXPECT_OK(cuMemcpyDtoHAsync_v2(registered, b, N, stream));
  EXPECT_OK(cuStreamSynchronize(stream));
  check(memcmp(pinned, registered, N) == 0, "bytes through pinned memory and a device copy", 0);
  void* mapped_host = NULL;
  CUresult mapped = cuMemHostAlloc(&mapped_host, N, YONDER_CU_MEMHOSTALLOC_DEVICEMAP);
  check(mapped == CUDA_ERROR_NOT_SUPPORTED, "host memory mapped to the device is not supported", mapped);

  /* The other memsets, checked byte for byte. */
  EXPECT_OK(cuMemsetD16_v2(a, 0xabcd, N / 2));
  EXPECT_OK(cuMemsetD8Async(b, 0x5a, N, stream));
  EXPECT_OK(cuMemsetD32Async(b, 0x01020304u, 2, stream));
  EXPECT_OK(cuStreamSynchronize(stream));
  unsigned short halves[4] = {0};
  EXPECT_OK(cuMemcpyDtoH_v2(halves, a + N - 8, 8));
  check(halves[0] == 0xabcd && halves[3] == 0xabcd, "cuMemsetD16 reached the end", 0);
  unsigned char bytes[12] = {0};
  EXPECT_OK(cuMemcpyDtoH_v2(bytes, b, sizeof bytes));
  unsigned int first = 0;
  memcpy(&first, bytes, 4);
  check(first == 0x01020304u && bytes[8] == 0x5a && bytes[11] == 0x5a, "cuMemsetD8Async and cuMemsetD32Async", 0);

  EXPECT_OK(cuMemHostUnregister(registered));
  CUresult not_registered = cuMemHostUnregister(registered);
  check(not_registered == 713, "unregistering twice is CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", not_registered);
  free(registered);
  EXPECT_OK(cuMemFreeHost(pinned));
  CUresult not_ours = cuMemFreeHost(pinned);
  check(not_ours == CUDA_ERROR_INVALID_VALUE, "freeing pinned memory twice is refused", not_ours);
  EXPECT_OK(cuMemFree_v2(a));
  EXPECT_OK(cuMemFree_v2(b));
  EXPECT_OK(cuStreamDestroy_v2(stream));
  EXPECT_OK(cuModuleUnload(module));

  /* Destroying the current context pops it; calls go on in the next one. */
  CUcontext primary = NULL;
  EXPECT_OK(cuDevicePrimaryCtxRetain(&primary, device));
  EXPECT_OK(cuCtxPushCurrent_v2(primary));
  EXPECT_OK(cuCtxPushCurrent_v2(ctx));
  EXPECT_OK(cuCtxDestroy_v2(ctx));
  EXPECT_OK(cuCtxGetCurrent(&current));
  check(current == primary, "the destroyed context popped, the one below current", 0);
  CUdeviceptr after = 0;
  EXPECT_OK(cuMemAlloc_v2(&after, 64));
  EXPECT_OK(cuMemFree_v2(after));
  EXPECT_OK(cuCtxSynchronize());
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "session") == 0) return session();
  if (argc >= 2 && strcmp(argv[1], "deferred") == 0) return deferred();
  if (argc >= 2 && strcmp(argv[1], "bad_handle") == 0) return bad_handle();
  if (argc >= 2 && strcmp(argv[1], "threads") == 0) return threads();
  if (argc >= 3 && strcmp(argv[1], "launches") == 0) return launches(atol(argv[2]));
  if (argc >= 3 && strcmp(argv[1], "samples") == 0) return samples(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "wait_for") == 0) {
    start();
    int count = 0;
    CUresult r = cuDeviceGetCount(&count);
    printf("before %d %d\n", r, count);
    for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; ++i) usleep(10000);
    r = cuDeviceGetCount(&count);
    printf("after %d\n", r);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "fork") == 0) {
    start();
    int count = 0;
    pid_t child = fork();
    if (child == 0) {
      CUresult r = cuDeviceGetCount(&count);
      _exit(r == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child is refused", 0);
    EXPECT_OK(cuDeviceGetCount(&count));
    check(count == 1, "the parent's session goes on", count);
    return g_failures == 0 ? 0 : 1;
  }
  if (argc >= 2 && strcmp(argv[1], "init") == 0) {
    CUresult r = cuInit(0);
    printf("init %d\n", r);
    return r == CUDA_SUCCESS ? 0 : 1;
  }
  if (argc >= 3 && strcmp(argv[1], "alloc") == 0) {
    start();
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc_v2(&p, (size_t)atol(argv[2]) << 20);
    if (r == CUDA_SUCCESS) {
      printf("alloc %s ok\n", argv[2]);
    } else {
      printf("alloc %s error %d\n", argv[2], r);
    }
    return 0;
  }
  fprintf(stderr, "usage: cuda_program session|deferred|bad_handle|threads|fork|init|alloc MB|launches N|"
          "wait_for FILE|samples DIR\n");
  return 2;
}
