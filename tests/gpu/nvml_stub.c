/* A stub libnvidia-ml for tests: a test double at the dlopen boundary, so
 * the NVML inventory can be exercised on machines without a GPU. It is
 * built once per behaviour (see CMakeLists.txt), selected by one of:
 *
 *   NVML_STUB_NO_DRIVER       nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   NVML_STUB_NO_DEVICES      init works, zero devices
 *   NVML_STUB_TWO_GPUS        two devices with the values in kStubGpus below
 *   NVML_STUB_BLOCKED_BY_OS   nvmlInit_v2 fails with NVML_ERROR_OPERATING_SYSTEM
 *   NVML_STUB_MISSING_SYMBOL  like TWO_GPUS but without nvmlDeviceGetCudaComputeCapability
 *
 * Signatures and struct layouts follow the NVML API reference; the error
 * strings are the ones the real nvmlErrorString returns. Not thread-safe,
 * which is fine: the inventory serialises its calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(NVML_STUB_NO_DRIVER) && !defined(NVML_STUB_NO_DEVICES) && \
    !defined(NVML_STUB_TWO_GPUS) && !defined(NVML_STUB_BLOCKED_BY_OS) && \
    !defined(NVML_STUB_MISSING_SYMBOL)
#error "define one NVML_STUB_* behaviour"
#endif

#define STUB_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_OPERATING_SYSTEM = 17,
};

typedef struct StubDevice* nvmlDevice_t;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

struct StubDevice {
  const char* name;
  const char* uuid;
  const char* bus_id;
  unsigned long long total;
  unsigned long long used;
  int utilization; /* < 0: report NVML_ERROR_NOT_SUPPORTED */
  int major;
  int minor;
};

/* Keep in sync with StubTwoGpus in inventory_test.cpp. */
static struct StubDevice kStubGpus[2] = {
    {"NVIDIA H200 (stub)", "GPU-5a1b0000-0000-4000-8000-000000000001", "00000000:17:00.0",
     150754820096ULL, 1073741824ULL, 37, 9, 0},
    {"NVIDIA L4 (stub)", "GPU-5a1b0000-0000-4000-8000-000000000002", "00000000:CA:00.0",
     24152899584ULL, 0ULL, -1, 8, 9},
};

static int g_init_count = 0; /* live nvmlInit_v2 calls not yet shut down */

/* Lets tests check that every init was paired with a shutdown. */
STUB_EXPORT int nvml_stub_init_count(void) { return g_init_count; }

STUB_EXPORT nvmlReturn_t nvmlInit_v2(void) {
#if defined(NVML_STUB_NO_DRIVER)
  return NVML_ERROR_DRIVER_NOT_LOADED;
#elif defined(NVML_STUB_BLOCKED_BY_OS)
  return NVML_ERROR_OPERATING_SYSTEM;
#else
  ++g_init_count;
  return NVML_SUCCESS;
#endif
}

STUB_EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

STUB_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
    default: return "Unknown Error";
  }
}

static nvmlReturn_t copy_text(const char* text, char* out, unsigned int length) {
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return copy_text("550.54.15", version, length);
}

STUB_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  *version = 12040;
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
#if defined(NVML_STUB_NO_DEVICES)
  *count = 0;
#else
  *count = 2;
#endif
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  unsigned int count = 0;
  nvmlReturn_t rc = nvmlDeviceGetCount_v2(&count);
  if (rc != NVML_SUCCESS) return rc;
  if (index >= count || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &kStubGpus[index];
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return copy_text(device->name, name, length);
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return copy_text(device->uuid, uuid, length);
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  memset(pci, 0, sizeof *pci);
  /* Fill the legacy field too, so a reader with the wrong layout would
   * see the wrong text and fail the round-trip test. */
  memcpy(pci->busIdLegacy, "0000:XX:00.0", 13);
  copy_text(device->bus_id, pci->busId, sizeof pci->busId);
  pci->pciDeviceId = 0x233510deU;
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  memory->total = device->total;
  memory->used = device->used;
  memory->free = device->total - device->used;
  return NVML_SUCCESS;
}

STUB_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t* utilization) {
  if (device->utilization < 0) return NVML_ERROR_NOT_SUPPORTED;
  utilization->gpu = (unsigned int)device->utilization;
  utilization->memory = 0;
  return NVML_SUCCESS;
}

#if !defined(NVML_STUB_MISSING_SYMBOL)
STUB_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                            int* minor) {
  *major = device->major;
  *minor = device->minor;
  return NVML_SUCCESS;
}
#endif

#if defined(NVML_STUB_TWO_GPUS)
/* Per-process accounting: two processes on the first GPU, one of
 * whose memory NVML cannot tell (NVML_VALUE_NOT_AVAILABLE), none on the
 * second. Or, when YONDER_NVML_STUB_PROCESSES names a file, the processes
 * its lines give ("DEVICE_INDEX HOST_PID BYTES"; at most 16 a device), read
 * at each call: how a daemon-level test makes a job's process hold GPU
 * memory. The layout is nvmlProcessInfo_t v2/v3. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

STUB_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                                 nvmlProcessInfo_t* infos) {
  const char* listed = getenv("YONDER_NVML_STUB_PROCESSES");
  if (listed != NULL) {
    nvmlProcessInfo_t found[16];
    unsigned int n = 0;
    FILE* f = fopen(listed, "r");
    unsigned int index = 0, pid = 0;
    unsigned long long bytes = 0;
    while (f != NULL && n < 16 && fscanf(f, "%u %u %llu", &index, &pid, &bytes) == 3) {
      if (index < 2 && device == &kStubGpus[index]) {
        found[n].pid = pid;
        found[n].usedGpuMemory = bytes;
        found[n].gpuInstanceId = found[n].computeInstanceId = 0;
        ++n;
      }
    }
    if (f != NULL) fclose(f);
    if (*count < n) {
      *count = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    memcpy(infos, found, n * sizeof found[0]);
    return NVML_SUCCESS;
  }
  unsigned int n = device == &kStubGpus[0] ? 2 : 0;
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  if (n == 2) {
    infos[0].pid = 4242;
    infos[0].usedGpuMemory = 1073741824ULL;
    infos[1].pid = 4343;
    infos[1].usedGpuMemory = ~0ULL;
  }
  return NVML_SUCCESS;
}
#endif
