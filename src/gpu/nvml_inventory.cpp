// The NVML backend of GpuInventory, loaded with dlopen.
//
// Why dlopen rather than linking -lnvidia-ml: the library ships with the
// driver, not with Debian's toolchain, so a linked binary would not even
// start on a machine without a GPU. Loading it at run time turns "no driver"
// into a report the user can act on. nvml.h is not in Debian main either, so
// the few types used here are declared below from NVIDIA's published NVML
// API reference (docs.nvidia.com/deploy/nvml-api); the layouts are pinned
// with static_asserts because a wrong layout reads garbage silently.
//
// Each probe() runs nvmlInit_v2 ... nvmlShutdown; init is cheap next to the
// queries, and not holding NVML open between probes means a driver reload
// or upgrade is seen by the next probe.
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <mutex>

#include "gpu/inventory.h"

namespace yonder::gpu {

namespace {

// nvmlReturn_t is a C enum whose values (0..999) fit an int, which is how
// the platform ABI passes it.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlErrorDriverNotLoaded = 9;
// "The GPU control device has been blocked by the operating system/cgroups"
// (nvml.h); nvmlErrorString gives "GPU access blocked by the operating
// system", the line nvidia-smi prints on WSL2 without GPU paravirtualization.
constexpr NvmlReturn kNvmlErrorOperatingSystem = 17;

struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3.
struct NvmlPciInfo {
  char bus_id_legacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_sub_system_id;
  char bus_id[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
static_assert(offsetof(NvmlPciInfo, domain) == 16, "nvmlPciInfo_t layout");
static_assert(offsetof(NvmlPciInfo, pci_sub_system_id) == 32, "nvmlPciInfo_t layout");
static_assert(offsetof(NvmlPciInfo, bus_id) == 36, "nvmlPciInfo_t layout");
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t size");

struct NvmlMemory {  // nvmlMemory_t (v1), bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(NvmlMemory) == 24, "nvmlMemory_t size");

// nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v2/_v3
// (v3 adds nothing to the layout v2 has: pid, memory, two instance ids).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // bytes; NVML_VALUE_NOT_AVAILABLE when unknown
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(offsetof(NvmlProcessInfo, used_gpu_memory) == 8, "nvmlProcessInfo_t layout");
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_t size");
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
constexpr unsigned int kMaxProcessesPerDevice = 4096;

struct NvmlUtilization {  // nvmlUtilization_t, percent over the last sample period
  unsigned int gpu;
  unsigned int memory;
};
static_assert(sizeof(NvmlUtilization) == 8, "nvmlUtilization_t size");

// Generous next to NVML's own maxima (name and uuid 96, driver version 80).
constexpr unsigned int kTextBufferSize = 256;

// The resolved entry points. Every one is required: a driver old enough to
// lack one is too old to trust the rest.
struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*system_get_driver_version)(char*, unsigned int);
  NvmlReturn (*system_get_cuda_driver_version)(int*);
  NvmlReturn (*device_get_count)(unsigned int*);
  NvmlReturn (*device_get_handle_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*device_get_name)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*device_get_uuid)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*device_get_pci_info)(NvmlDevice, NvmlPciInfo*);
  NvmlReturn (*device_get_memory_info)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*device_get_utilization_rates)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*device_get_cuda_compute_capability)(NvmlDevice, int*, int*);
  // Optional: per-process accounting (VRAM limits). Absent in very old drivers.
  NvmlReturn (*device_get_compute_running_processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*);
  // Optional: for the dashboard's history. nvmlDeviceGetTemperature takes
  // a sensor (NVML_TEMPERATURE_GPU = 0) and gives degrees C;
  // nvmlDeviceGetPowerUsage gives the board's draw in milliwatts.
  NvmlReturn (*device_get_temperature)(NvmlDevice, int, unsigned int*);
  NvmlReturn (*device_get_power_usage)(NvmlDevice, unsigned int*);
};
constexpr int kNvmlTemperatureGpu = 0;

template <typename Fn>
bool resolve(void* handle, const char* symbol, Fn& slot, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (slot == nullptr && missing.empty()) missing = symbol;
  return slot != nullptr;
}

// Returns the name of the first missing symbol, or "" when all resolved.
std::string resolve_all(void* handle, NvmlApi& api) {
  std::string missing;
  resolve(handle, "nvmlInit_v2", api.init, missing);
  resolve(handle, "nvmlShutdown", api.shutdown, missing);
  resolve(handle, "nvmlErrorString", api.error_string, missing);
  resolve(handle, "nvmlSystemGetDriverVersion", api.system_get_driver_version, missing);
  resolve(handle, "nvmlSystemGetCudaDriverVersion", api.system_get_cuda_driver_version, missing);
  resolve(handle, "nvmlDeviceGetCount_v2", api.device_get_count, missing);
  resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api.device_get_handle_by_index, missing);
  resolve(handle, "nvmlDeviceGetName", api.device_get_name, missing);
  resolve(handle, "nvmlDeviceGetUUID", api.device_get_uuid, missing);
  resolve(handle, "nvmlDeviceGetPciInfo_v3", api.device_get_pci_info, missing);
  resolve(handle, "nvmlDeviceGetMemoryInfo", api.device_get_memory_info, missing);
  resolve(handle, "nvmlDeviceGetUtilizationRates", api.device_get_utilization_rates, missing);
  resolve(handle, "nvmlDeviceGetCudaComputeCapability",
          api.device_get_cuda_compute_capability, missing);
  std::string optional;
  if (!resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api.device_get_compute_running_processes, optional)) {
    resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v2", api.device_get_compute_running_processes, optional);
  }
  resolve(handle, "nvmlDeviceGetTemperature", api.device_get_temperature, optional);
  resolve(handle, "nvmlDeviceGetPowerUsage", api.device_get_power_usage, optional);
  return missing;
}

// NVML writes NUL-terminated text; the explicit bound guards against a
// driver that fills the buffer to the brim.
std::string text_from(const char* buffer, size_t size) {
  size_t length = 0;
  while (length < size && buffer[length] != '\0') ++length;
  return std::string(buffer, length);
}

// 12040 -> "12.4", 11080 -> "11.8" (NVML encodes major*1000 + minor*10).
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

class NvmlInventory final : public GpuInventory {
 public:
  explicit NvmlInventory(std::string library) : library_(std::move(library)) {}

  ~NvmlInventory() override {
    // Safe: every successful nvmlInit_v2 was paired with nvmlShutdown.
    if (handle_ != nullptr) dlclose(handle_);
  }

  NvmlInventory(const NvmlInventory&) = delete;
  NvmlInventory& operator=(const NvmlInventory&) = delete;

  InventoryReport probe() override {
    std::lock_guard<std::mutex> lock(mutex_);
    InventoryReport report;
    report.source = "nvml";
    report.library = library_;
    if (!load(report)) return report;

    NvmlReturn rc = api_.init();
    if (rc != kNvmlSuccess) {
      fail(report, "nvmlInit_v2", rc);
      return report;
    }
    query(report);
    rc = api_.shutdown();
    if (rc != kNvmlSuccess && report.state == InventoryState::kOk) {
      // The inventory is complete; a failed shutdown only matters for logs.
      report.detail = "nvmlShutdown: " + error_text(rc);
    }
    return report;
  }

  Result<std::vector<GpuProcess>> processes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    InventoryReport report;
    if (!load(report)) return make_error(ErrorCode::kUnavailable, "NVML is not available: " + report.detail);
    if (api_.device_get_compute_running_processes == nullptr) {
      return make_error(ErrorCode::kFailedPrecondition, library_ +
                        " has no nvmlDeviceGetComputeRunningProcesses; update the NVIDIA driver to enforce VRAM limits");
    }
    NvmlReturn rc = api_.init();
    if (rc != kNvmlSuccess) return make_error(ErrorCode::kUnavailable, "nvmlInit_v2: " + error_text(rc));
    auto out = query_processes();
    api_.shutdown();
    return out;
  }

 private:
  Result<std::vector<GpuProcess>> query_processes() const {
    std::vector<GpuProcess> out;
    unsigned int count = 0;
    NvmlReturn rc = api_.device_get_count(&count);
    if (rc != kNvmlSuccess) return make_error(ErrorCode::kInternal, "nvmlDeviceGetCount_v2: " + error_text(rc));
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice device = nullptr;
      if ((rc = api_.device_get_handle_by_index(i, &device)) != kNvmlSuccess) {
        return make_error(ErrorCode::kInternal, "nvmlDeviceGetHandleByIndex_v2: " + error_text(rc));
      }
      char uuid[kTextBufferSize] = {};
      if ((rc = api_.device_get_uuid(device, uuid, kTextBufferSize)) != kNvmlSuccess) {
        return make_error(ErrorCode::kInternal, "nvmlDeviceGetUUID: " + error_text(rc));
      }
      // Ask with a buffer; NVML says how many it needs when that is too small
      // (processes come and go between the calls, so retry a few times).
      std::vector<NvmlProcessInfo> infos(64);
      for (int attempt = 0; attempt < 4; ++attempt) {
        unsigned int n = static_cast<unsigned int>(infos.size());
        rc = api_.device_get_compute_running_processes(device, &n, infos.data());
        if (rc == kNvmlErrorInsufficientSize && n <= kMaxProcessesPerDevice) {
          infos.resize(n + 8);
          continue;
        }
        if (rc == kNvmlSuccess) infos.resize(std::min<size_t>(n, infos.size()));
        break;
      }
      if (rc != kNvmlSuccess) {
        return make_error(ErrorCode::kInternal, "nvmlDeviceGetComputeRunningProcesses: " + error_text(rc));
      }
      for (const auto& p : infos) {
        out.push_back({text_from(uuid, sizeof uuid), static_cast<int>(p.pid),
                       p.used_gpu_memory == kNvmlValueNotAvailable ? 0 : p.used_gpu_memory});
      }
    }
    return out;
  }

  // Opens and resolves the library unless an earlier probe already did.
  bool load(InventoryReport& report) {
    if (handle_ != nullptr) return true;
    dlerror();  // clear any stale error so the one read below is ours
    void* handle = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      report.state = InventoryState::kNoLibrary;
      report.detail = why != nullptr ? why : "dlopen failed";
      return false;
    }
    NvmlApi api{};
    std::string missing = resolve_all(handle, api);
    if (!missing.empty()) {
      dlclose(handle);
      report.state = InventoryState::kError;
      report.detail = library_ + " lacks the symbol " + missing +
                      "; the NVIDIA driver is too old or this is not libnvidia-ml";
      return false;
    }
    handle_ = handle;
    api_ = api;
    return true;
  }

  std::string error_text(NvmlReturn rc) const {
    const char* text = api_.error_string(rc);
    return (text != nullptr ? std::string(text) : std::string("unknown error")) + " (code " +
           std::to_string(rc) + ")";
  }

  void fail(InventoryReport& report, const std::string& call, NvmlReturn rc) const {
    std::string text = error_text(rc);
    if (rc == kNvmlErrorDriverNotLoaded) {
      report.state = InventoryState::kNoDriver;
    } else if (rc == kNvmlErrorOperatingSystem || mentions_blocked_by_os(text)) {
      report.state = InventoryState::kBlockedByOs;
    } else {
      report.state = InventoryState::kError;
    }
    report.detail = call + ": " + text;
    report.devices.clear();
  }

  // Fills the report between init and shutdown. Name, UUID and memory are
  // required; utilization, PCI id and the CUDA version are not reported by
  // every GPU or driver, so their absence leaves the documented defaults.
  void query(InventoryReport& report) const {
    char text[kTextBufferSize] = {};
    NvmlReturn rc = api_.system_get_driver_version(text, kTextBufferSize);
    if (rc != kNvmlSuccess) return fail(report, "nvmlSystemGetDriverVersion", rc);
    report.driver_version = text_from(text, sizeof text);

    int cuda_version = 0;
    if (api_.system_get_cuda_driver_version(&cuda_version) == kNvmlSuccess && cuda_version > 0) {
      report.cuda_driver_version = cuda_version_text(cuda_version);
    }

    unsigned int count = 0;
    rc = api_.device_get_count(&count);
    if (rc != kNvmlSuccess) return fail(report, "nvmlDeviceGetCount_v2", rc);
    if (count == 0) {
      report.state = InventoryState::kNoDevices;
      return;
    }

    for (unsigned int i = 0; i < count; ++i) {
      const std::string where = " (GPU " + std::to_string(i) + ")";
      NvmlDevice device = nullptr;
      rc = api_.device_get_handle_by_index(i, &device);
      if (rc != kNvmlSuccess) return fail(report, "nvmlDeviceGetHandleByIndex_v2" + where, rc);

      GpuDevice out;
      out.index = static_cast<int>(i);
      char buffer[kTextBufferSize] = {};
      rc = api_.device_get_name(device, buffer, kTextBufferSize);
      if (rc != kNvmlSuccess) return fail(report, "nvmlDeviceGetName" + where, rc);
      out.name = text_from(buffer, sizeof buffer);

      char uuid[kTextBufferSize] = {};
      rc = api_.device_get_uuid(device, uuid, kTextBufferSize);
      if (rc != kNvmlSuccess) return fail(report, "nvmlDeviceGetUUID" + where, rc);
      out.uuid = text_from(uuid, sizeof uuid);

      NvmlMemory memory{};
      rc = api_.device_get_memory_info(device, &memory);
      if (rc != kNvmlSuccess) return fail(report, "nvmlDeviceGetMemoryInfo" + where, rc);
      out.memory_total_bytes = memory.total;
      out.memory_used_bytes = memory.used;

      NvmlPciInfo pci{};
      if (api_.device_get_pci_info(device, &pci) == kNvmlSuccess) {
        out.pci_bus_id = text_from(pci.bus_id, sizeof pci.bus_id);
      }
      NvmlUtilization utilization{};
      if (api_.device_get_utilization_rates(device, &utilization) == kNvmlSuccess &&
          utilization.gpu <= 100) {
        out.utilization_percent = static_cast<int>(utilization.gpu);
      }
      unsigned int celsius = 0, milliwatts = 0;
      if (api_.device_get_temperature != nullptr &&
          api_.device_get_temperature(device, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess && celsius < 1000) {
        out.temperature_c = static_cast<int>(celsius);
      }
      if (api_.device_get_power_usage != nullptr && api_.device_get_power_usage(device, &milliwatts) == kNvmlSuccess &&
          milliwatts < 100'000'000) {
        out.power_milliwatts = static_cast<int>(milliwatts);
      }
      int major = 0;
      int minor = 0;
      if (api_.device_get_cuda_compute_capability(device, &major, &minor) == kNvmlSuccess) {
        out.compute_major = major;
        out.compute_minor = minor;
      }
      report.devices.push_back(std::move(out));
    }
    report.state = InventoryState::kOk;
  }

  const std::string library_;
  std::mutex mutex_;  // guards handle_, api_ and NVML's init/shutdown pairing
  void* handle_ = nullptr;
  NvmlApi api_{};
};

}  // namespace

std::unique_ptr<GpuInventory> make_nvml_inventory(std::string library) {
  return std::make_unique<NvmlInventory>(std::move(library));
}

}  // namespace yonder::gpu
