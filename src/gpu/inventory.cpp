// Report vocabulary (names, messages, exit codes), its JSON form, the fake
// inventory and the spec parser. The NVML backend is in nvml_inventory.cpp.
#include "gpu/inventory.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>

namespace yonder::gpu {

namespace {

constexpr const char* kSpecForms =
    "expected \"nvml\", \"nvml:/path/to/libnvidia-ml.so.1\", \"fake:N\" or "
    "\"fake:N:NAME:MEMGIB\" (N 0..64, NAME of letters, digits, space, '.', '_' or '-', "
    "MEMGIB 1..4096)";
constexpr int kMaxFakeDevices = 64;
constexpr int kMaxFakeMemoryGib = 4096;
constexpr size_t kMaxFakeNameLength = 64;

// Bounds for report_from_json: a report is small, anything larger is not one.
constexpr size_t kMaxDevices = 256;
constexpr size_t kMaxFieldLength = 256;
constexpr size_t kMaxDetailLength = 4096;

constexpr InventoryState kAllStates[] = {
    InventoryState::kOk,        InventoryState::kNoLibrary,   InventoryState::kNoDriver,
    InventoryState::kNoDevices, InventoryState::kBlockedByOs, InventoryState::kError,
};

std::optional<int> parse_int(std::string_view text, int min, int max) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

bool valid_fake_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxFakeNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '.' || c == '_' ||
           c == '-';
  });
}

// Field readers for report_from_json. `where` names the field in errors
// ("devices[1].uuid") so a bad report can be fixed without a debugger.
Error shape_error(const std::string& where, const std::string& expected) {
  return make_error(ErrorCode::kInvalidArgument,
                    "GPU inventory report: field '" + where + "' " + expected);
}

Result<std::string> read_string(const nlohmann::json& object, const char* key,
                                const std::string& prefix, size_t max_length) {
  auto it = object.find(key);
  if (it == object.end()) return shape_error(prefix + key, "is missing");
  if (!it->is_string()) return shape_error(prefix + key, "must be a string");
  const auto& text = it->get_ref<const std::string&>();
  if (text.size() > max_length) {
    return shape_error(prefix + key, "is longer than " + std::to_string(max_length) + " bytes");
  }
  return text;
}

Result<uint64_t> read_uint64(const nlohmann::json& object, const char* key,
                             const std::string& prefix) {
  auto it = object.find(key);
  if (it == object.end()) return shape_error(prefix + key, "is missing");
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(it->get<int64_t>());
  }
  return shape_error(prefix + key, "must be a non-negative integer");
}

Result<int> read_int(const nlohmann::json& object, const char* key, const std::string& prefix,
                     int min, int max) {
  auto it = object.find(key);
  if (it == object.end()) return shape_error(prefix + key, "is missing");
  if (!it->is_number_integer()) return shape_error(prefix + key, "must be an integer");
  // Unsigned values above INT64_MAX fail the range check via the first test.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return shape_error(prefix + key, "is out of range");
  }
  int64_t value = it->get<int64_t>();
  if (value < min || value > max) return shape_error(prefix + key, "is out of range");
  return static_cast<int>(value);
}

Result<GpuDevice> read_device(const nlohmann::json& json, size_t position) {
  std::string prefix = "devices[" + std::to_string(position) + "].";
  if (!json.is_object()) {
    return shape_error("devices[" + std::to_string(position) + "]", "must be an object");
  }
  GpuDevice device;
  auto index = read_int(json, "index", prefix, 0, std::numeric_limits<int>::max());
  if (!index) return std::move(index).error();
  device.index = *index;
  auto uuid = read_string(json, "uuid", prefix, kMaxFieldLength);
  if (!uuid) return std::move(uuid).error();
  device.uuid = std::move(*uuid);
  auto name = read_string(json, "name", prefix, kMaxFieldLength);
  if (!name) return std::move(name).error();
  device.name = std::move(*name);
  auto pci = read_string(json, "pci_bus_id", prefix, kMaxFieldLength);
  if (!pci) return std::move(pci).error();
  device.pci_bus_id = std::move(*pci);
  auto total = read_uint64(json, "memory_total_bytes", prefix);
  if (!total) return std::move(total).error();
  device.memory_total_bytes = *total;
  auto used = read_uint64(json, "memory_used_bytes", prefix);
  if (!used) return std::move(used).error();
  device.memory_used_bytes = *used;
  auto utilization = read_int(json, "utilization_percent", prefix, -1, 100);
  if (!utilization) return std::move(utilization).error();
  device.utilization_percent = *utilization;
  // Absent from reports of older versions: unknown.
  for (auto [key, slot, max] : {std::tuple{"temperature_c", &device.temperature_c, 1000},
                                std::tuple{"power_milliwatts", &device.power_milliwatts, 100'000'000}}) {
    if (!json.contains(key)) continue;
    auto value = read_int(json, key, prefix, -1, max);
    if (!value) return std::move(value).error();
    *slot = *value;
  }
  auto major = read_int(json, "compute_major", prefix, 0, 1000);
  if (!major) return std::move(major).error();
  device.compute_major = *major;
  auto minor = read_int(json, "compute_minor", prefix, 0, 1000);
  if (!minor) return std::move(minor).error();
  device.compute_minor = *minor;
  return device;
}

Result<InventoryReport> read_report(const nlohmann::json& json) {
  if (!json.is_object()) {
    return make_error(ErrorCode::kInvalidArgument, "GPU inventory report must be a JSON object");
  }
  InventoryReport report;
  auto state = read_string(json, "state", "", kMaxFieldLength);
  if (!state) return std::move(state).error();
  auto known = std::find_if(std::begin(kAllStates), std::end(kAllStates),
                            [&](InventoryState s) { return *state == state_name(s); });
  if (known == std::end(kAllStates)) {
    return shape_error("state", "must be one of ok, no_library, no_driver, no_devices, "
                                "blocked_by_os, error");
  }
  report.state = *known;

  struct StringField {
    const char* key;
    std::string* target;
    size_t max_length;
  };
  const StringField fields[] = {
      {"source", &report.source, kMaxFieldLength},
      {"library", &report.library, kMaxFieldLength},
      {"driver_version", &report.driver_version, kMaxFieldLength},
      {"cuda_driver_version", &report.cuda_driver_version, kMaxFieldLength},
      {"detail", &report.detail, kMaxDetailLength},
  };
  for (const auto& field : fields) {
    auto value = read_string(json, field.key, "", field.max_length);
    if (!value) return std::move(value).error();
    *field.target = std::move(*value);
  }

  auto devices = json.find("devices");
  if (devices == json.end()) return shape_error("devices", "is missing");
  if (!devices->is_array()) return shape_error("devices", "must be an array");
  if (devices->size() > kMaxDevices) {
    return shape_error("devices", "has more than " + std::to_string(kMaxDevices) + " entries");
  }
  for (size_t i = 0; i < devices->size(); ++i) {
    auto device = read_device((*devices)[i], i);
    if (!device) return std::move(device).error();
    report.devices.push_back(std::move(*device));
  }
  return report;
}

}  // namespace

const char* state_name(InventoryState state) {
  switch (state) {
    case InventoryState::kOk: return "ok";
    case InventoryState::kNoLibrary: return "no_library";
    case InventoryState::kNoDriver: return "no_driver";
    case InventoryState::kNoDevices: return "no_devices";
    case InventoryState::kBlockedByOs: return "blocked_by_os";
    case InventoryState::kError: return "error";
  }
  return "error";
}

int state_exit_code(InventoryState state) {
  switch (state) {
    case InventoryState::kOk: return 0;
    case InventoryState::kNoLibrary: return 10;
    case InventoryState::kNoDriver: return 11;
    case InventoryState::kNoDevices: return 12;
    case InventoryState::kBlockedByOs: return 13;
    case InventoryState::kError: return 14;
  }
  return 14;
}

std::string state_message(const InventoryReport& report) {
  const std::string library = report.library.empty() ? "libnvidia-ml.so.1" : report.library;
  switch (report.state) {
    case InventoryState::kOk: {
      std::string count = std::to_string(report.devices.size()) +
                          (report.devices.size() == 1 ? " GPU" : " GPUs");
      if (report.source == "fake") {
        return "Using " + count + " from a fake inventory; they are not real hardware, so "
               "use the \"nvml\" inventory to share a real GPU.";
      }
      return "Found " + count + " through NVML (driver " + report.driver_version + ", CUDA " +
             report.cuda_driver_version + "), ready to share.";
    }
    case InventoryState::kNoLibrary:
      return "The NVIDIA driver is not installed: " + library + " could not be loaded. "
             "Install the NVIDIA driver (on Debian, the nvidia-driver package from the "
             "non-free component) and check that `ldconfig -p | grep nvidia-ml` lists it.";
    case InventoryState::kNoDriver:
      return "The NVML library (" + library + ") was found but the NVIDIA kernel driver is "
             "not loaded. Run `sudo modprobe nvidia` (or reboot after installing the driver) "
             "and check that `nvidia-smi` works.";
    case InventoryState::kNoDevices:
      if (report.source == "fake") {
        return "The fake inventory was configured with no GPUs; use \"fake:N\" with N > 0 "
               "to simulate some.";
      }
      return "The NVIDIA driver is loaded but reports no GPUs. Check `nvidia-smi -L`; in a "
             "container or VM, make sure the GPU is passed through (e.g. docker --gpus all).";
    case InventoryState::kBlockedByOs:
      return "GPU access is blocked by the operating system. On WSL2, GPU paravirtualization "
             "must be enabled: update the Windows NVIDIA driver, run `wsl --update` and "
             "`wsl --shutdown` from Windows, and check that /usr/lib/wsl/lib/libnvidia-ml.so.1 "
             "exists; in a container, check that its cgroup allows the /dev/nvidia* devices.";
    case InventoryState::kError:
      if (report.detail.find("mismatch") != std::string::npos) {
        // NVML_ERROR_LIB_RM_VERSION_MISMATCH: the usual state after an
        // upgrade, and the one kError users can fix without a bug report.
        return "The NVML library and the loaded NVIDIA kernel driver have different versions, "
               "usually because the driver was upgraded without a reboot; reboot (or reload "
               "the nvidia kernel modules).";
      }
      return "NVML reported an unexpected error" +
             (report.detail.empty() ? std::string() : " (" + report.detail + ")") +
             ". Check that `nvidia-smi` works; if it does, report this error with the output "
             "of `yonder gpus --json`.";
  }
  return "Unknown GPU inventory state.";
}

nlohmann::json to_json(const InventoryReport& report) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& device : report.devices) {
    devices.push_back({
        {"index", device.index},
        {"uuid", device.uuid},
        {"name", device.name},
        {"pci_bus_id", device.pci_bus_id},
        {"memory_total_bytes", device.memory_total_bytes},
        {"memory_used_bytes", device.memory_used_bytes},
        {"utilization_percent", device.utilization_percent},
        {"temperature_c", device.temperature_c},
        {"power_milliwatts", device.power_milliwatts},
        {"compute_major", device.compute_major},
        {"compute_minor", device.compute_minor},
    });
  }
  return {
      {"state", state_name(report.state)},
      {"message", state_message(report)},
      {"exit_code", state_exit_code(report.state)},
      {"source", report.source},
      {"library", report.library},
      {"driver_version", report.driver_version},
      {"cuda_driver_version", report.cuda_driver_version},
      {"devices", std::move(devices)},
      {"detail", report.detail},
  };
}

Result<InventoryReport> report_from_json(const nlohmann::json& json) {
  // The readers check types before every get<>, so this catch is a seatbelt
  // for the promise "never throws", not a path we expect to take.
  try {
    return read_report(json);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string("GPU inventory report is malformed: ") + e.what());
  }
}

bool mentions_blocked_by_os(std::string_view text) {
  constexpr std::string_view kNeedle = "blocked by the operating system";
  auto it = std::search(text.begin(), text.end(), kNeedle.begin(), kNeedle.end(),
                        [](char a, char b) {
                          return std::tolower(static_cast<unsigned char>(a)) ==
                                 std::tolower(static_cast<unsigned char>(b));
                        });
  return it != text.end();
}

FakeGpuInventory::FakeGpuInventory(int count, std::string name, uint64_t memory_total_bytes)
    : count_(count), name_(std::move(name)), memory_total_bytes_(memory_total_bytes) {}

InventoryReport FakeGpuInventory::probe() {
  InventoryReport report;
  report.source = "fake";
  report.library = "";
  report.driver_version = "fake";
  report.cuda_driver_version = "12.4";
  report.state = count_ > 0 ? InventoryState::kOk : InventoryState::kNoDevices;
  report.detail = count_ > 0 ? "" : "fake inventory configured with 0 devices";
  std::lock_guard lock(mutex_);
  for (int i = 0; i < count_; ++i) {
    GpuDevice device;
    device.index = i;
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "GPU-fake-0000-0000-0000-%012d", i);
    device.uuid = buffer;
    std::snprintf(buffer, sizeof buffer, "00000000:%02X:00.0", (i + 1) & 0xff);
    device.pci_bus_id = buffer;
    device.name = "FAKE " + name_;
    device.memory_total_bytes = memory_total_bytes_;
    for (const auto& p : processes_) {
      if (p.uuid == device.uuid) device.memory_used_bytes += p.used_bytes;
    }
    // Made-up readings that move with the simulated processes, so charts
    // of a fake GPU show something: busier with each process on it.
    int busy = 0;
    for (const auto& p : processes_) busy += p.uuid == device.uuid ? 1 : 0;
    device.utilization_percent = std::min(100, 40 * busy);
    device.temperature_c = 35 + 10 * std::min(busy, 5);
    device.power_milliwatts = 30'000 + 60'000 * std::min(busy, 5);
    device.compute_major = 8;
    device.compute_minor = 0;
    report.devices.push_back(std::move(device));
  }
  return report;
}

Result<std::vector<GpuProcess>> FakeGpuInventory::processes() {
  std::lock_guard lock(mutex_);
  return processes_;
}

void FakeGpuInventory::simulate_process(const std::string& uuid, int pid, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  std::erase_if(processes_, [&](const GpuProcess& p) { return p.uuid == uuid && p.pid == pid; });
  if (bytes > 0) processes_.push_back({uuid, pid, bytes});
}

std::unique_ptr<GpuInventory> make_fake_inventory(int count, std::string name,
                                                  uint64_t memory_total_bytes) {
  return std::make_unique<FakeGpuInventory>(std::clamp(count, 0, kMaxFakeDevices), std::move(name),
                                            memory_total_bytes);
}

Result<std::unique_ptr<GpuInventory>> make_inventory(const std::string& spec) {
  auto invalid = [&spec](const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument,
                      "bad GPU inventory spec \"" + spec + "\"" + (why.empty() ? "" : ": " + why) +
                          "; " + kSpecForms);
  };
  if (spec == "nvml") return make_nvml_inventory();
  constexpr std::string_view kNvmlPrefix = "nvml:";
  if (spec.starts_with(kNvmlPrefix)) {
    std::string library = spec.substr(kNvmlPrefix.size());
    if (library.empty()) return invalid("the library path is empty");
    return make_nvml_inventory(std::move(library));
  }
  constexpr std::string_view kFakePrefix = "fake:";
  if (!spec.starts_with(kFakePrefix)) return invalid("");

  std::vector<std::string_view> parts;
  std::string_view rest = std::string_view(spec).substr(kFakePrefix.size());
  while (true) {
    size_t colon = rest.find(':');
    parts.push_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (parts.size() != 1 && parts.size() != 3) return invalid("wrong number of ':' fields");
  auto count = parse_int(parts[0], 0, kMaxFakeDevices);
  if (!count) return invalid("N must be an integer from 0 to 64");
  if (parts.size() == 1) return make_fake_inventory(*count);
  if (!valid_fake_name(parts[1])) return invalid("NAME is empty, too long or has odd characters");
  auto gib = parse_int(parts[2], 1, kMaxFakeMemoryGib);
  if (!gib) return invalid("MEMGIB must be an integer from 1 to 4096");
  return make_fake_inventory(*count, std::string(parts[1]), static_cast<uint64_t>(*gib) << 30);
}

}  // namespace yonder::gpu
