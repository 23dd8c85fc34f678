// GPU inventory: which NVIDIA GPUs this machine can lend, and if none, why.
//
// The real inventory reads NVML (libnvidia-ml) through dlopen, so a Yonder
// binary runs on machines without the driver and can say what is missing
// instead of failing to start. The fake inventory ("fake:N") exists for
// tests and demos on machines without a GPU; its reports say source "fake"
// so nothing downstream can mistake them for hardware.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace yonder::gpu {

// Why a probe did or did not find GPUs. Each state has a stable name (for
// --json and logs), a message telling the user what to do, and a documented
// process exit code (for `yonder gpus` and scripts).
enum class InventoryState {
  kOk,           // at least one GPU, all queries answered
  kNoLibrary,    // libnvidia-ml could not be loaded: no NVIDIA driver installed
  kNoDriver,     // the library loaded but the kernel module is not loaded
  kNoDevices,    // the driver works but reports zero GPUs
  kBlockedByOs,  // NVML_ERROR_OPERATING_SYSTEM: WSL without GPU-PV, cgroup rules
  kError,        // anything else; `detail` carries NVML's words
};

struct GpuDevice {
  int index = 0;             // NVML index, stable until reboot
  std::string uuid;          // "GPU-xxxxxxxx-..." as nvidia-smi prints it
  std::string name;          // marketing name, e.g. "NVIDIA H200"
  std::string pci_bus_id;    // "00000000:17:00.0"; empty when unknown
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  int utilization_percent = -1;  // -1 unknown (not every GPU reports it)
  int temperature_c = -1;        // the GPU die; -1 unknown
  int power_milliwatts = -1;     // the board's draw now; -1 unknown
  int compute_major = 0;         // CUDA compute capability, e.g. 9.0
  int compute_minor = 0;

  bool operator==(const GpuDevice&) const = default;
};

struct InventoryReport {
  InventoryState state = InventoryState::kError;
  std::string source;               // "nvml" or "fake"
  std::string library;              // path tried/loaded
  std::string driver_version;       // e.g. "550.54.15"
  std::string cuda_driver_version;  // e.g. "12.4"
  std::vector<GpuDevice> devices;
  std::string detail;  // raw error text from dlopen/NVML, for logs and --json

  bool operator==(const InventoryReport&) const = default;
};

// How many GPUs the report offers: its devices when the probe succeeded, 0 otherwise.
inline int usable_count(const InventoryReport& report) {
  return report.state == InventoryState::kOk ? static_cast<int>(report.devices.size()) : 0;
}

// "ok", "no_library", "no_driver", "no_devices", "blocked_by_os", "error".
const char* state_name(InventoryState state);

// One or two sentences: what the state means and what to do next.
std::string state_message(const InventoryReport& report);

// Exit codes of commands that report the inventory; documented in
// src/gpu/README.md and stable: ok 0, no_library 10, no_driver 11,
// no_devices 12, blocked_by_os 13, error 14.
int state_exit_code(InventoryState state);

// The report as JSON; adds "message" and "exit_code" for readers of --json.
nlohmann::json to_json(const InventoryReport& report);

// The inverse of to_json. Strict about shape and types (the JSON may come
// from a peer or a file), bounded in size, never throws. "message" and
// "exit_code" and unknown keys are ignored, since they are derived or newer.
Result<InventoryReport> report_from_json(const nlohmann::json& json);

// True when `text` (nvidia-smi output, an NVML error string) carries the
// "blocked by the operating system" wording NVML uses for
// NVML_ERROR_OPERATING_SYSTEM. Case-insensitive.
bool mentions_blocked_by_os(std::string_view text);

// GPU memory held by one process on one device (NVML's per-process
// accounting: nvmlDeviceGetComputeRunningProcesses). `pid` is a host pid.
struct GpuProcess {
  std::string uuid;
  int pid = 0;
  uint64_t used_bytes = 0;

  bool operator==(const GpuProcess&) const = default;
};

class GpuInventory {
 public:
  virtual ~GpuInventory() = default;
  // Thread-safe; may block briefly (NVML calls), so the daemon calls it off
  // its event loop. Never throws; failures are states of the report.
  virtual InventoryReport probe() = 0;
  // Every compute process on every device with the memory it holds. Same
  // threading as probe(). An error when the driver cannot say (then VRAM
  // limits cannot be enforced, and the caller must say so).
  virtual Result<std::vector<GpuProcess>> processes() = 0;
};

// The fake inventory behind "fake:N": devices that do not exist, for tests
// and demos, with simulated per-process memory use so VRAM enforcement can
// be tested without a GPU. Thread-safe.
class FakeGpuInventory final : public GpuInventory {
 public:
  FakeGpuInventory(int count, std::string name, uint64_t memory_total_bytes);
  InventoryReport probe() override;
  Result<std::vector<GpuProcess>> processes() override;
  // Pretends host process `pid` holds `bytes` on device `uuid` (0 removes it).
  void simulate_process(const std::string& uuid, int pid, uint64_t bytes);

 private:
  const int count_;
  const std::string name_;
  const uint64_t memory_total_bytes_;
  std::mutex mutex_;  // guards processes_
  std::vector<GpuProcess> processes_;
};

// Loads `library` on the first probe that needs it (and retries on later
// probes while it is missing, so installing the driver needs no restart).
std::unique_ptr<GpuInventory> make_nvml_inventory(std::string library = "libnvidia-ml.so.1");

// `count` identical fake devices named "FAKE <name>" with uuids
// "GPU-fake-0000-0000-0000-<index>"; count 0 gives a kNoDevices report.
std::unique_ptr<GpuInventory> make_fake_inventory(int count, std::string name = "GPU",
                                                  uint64_t memory_total_bytes = 24ULL << 30);

// Accepted specs: "nvml" (default library), "nvml:/path/libnvidia-ml.so.1",
// "fake:N", "fake:N:NAME:MEMGIB" (N 0..64, NAME of [A-Za-z0-9 ._-], MEMGIB
// 1..4096). Anything else is kInvalidArgument listing these forms.
Result<std::unique_ptr<GpuInventory>> make_inventory(const std::string& spec);

}  // namespace yonder::gpu
