// Tests of the GPU inventory. The NVML paths run against stub libraries
// (tests/gpu/nvml_stub.c) loaded through the same dlopen as the real one;
// the build passes their paths in NVML_STUB_*_PATH.
#include "gpu/inventory.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace yonder::gpu {
namespace {

using ::testing::HasSubstr;

// The devices nvml_stub.c reports; keep in sync with kStubGpus there.
std::vector<GpuDevice> stub_two_gpus() {
  GpuDevice h200;
  h200.index = 0;
  h200.name = "NVIDIA H200 (stub)";
  h200.uuid = "GPU-5a1b0000-0000-4000-8000-000000000001";
  h200.pci_bus_id = "00000000:17:00.0";
  h200.memory_total_bytes = 150754820096ULL;
  h200.memory_used_bytes = 1073741824ULL;
  h200.utilization_percent = 37;
  h200.compute_major = 9;
  h200.compute_minor = 0;
  GpuDevice l4;
  l4.index = 1;
  l4.name = "NVIDIA L4 (stub)";
  l4.uuid = "GPU-5a1b0000-0000-4000-8000-000000000002";
  l4.pci_bus_id = "00000000:CA:00.0";
  l4.memory_total_bytes = 24152899584ULL;
  l4.memory_used_bytes = 0;
  l4.utilization_percent = -1;  // the stub answers NOT_SUPPORTED
  l4.compute_major = 8;
  l4.compute_minor = 9;
  return {h200, l4};
}

// Live nvmlInit_v2 calls in a stub, read through its test-only export.
// dlopen of an already loaded path returns the same instance.
int stub_init_count(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return -1;
  auto count = reinterpret_cast<int (*)()>(dlsym(handle, "nvml_stub_init_count"));
  int result = count != nullptr ? count() : -1;
  dlclose(handle);
  return result;
}

TEST(NvmlInventory, MissingLibraryIsNoLibraryWithAdvice) {
  auto inventory = make_nvml_inventory("/nonexistent/libnvidia-ml.so.1");
  InventoryReport report = inventory->probe();
  EXPECT_EQ(report.state, InventoryState::kNoLibrary);
  EXPECT_EQ(state_exit_code(report.state), 10);
  EXPECT_EQ(report.source, "nvml");
  EXPECT_EQ(report.library, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_THAT(report.detail, HasSubstr("/nonexistent/libnvidia-ml.so.1"));  // dlerror text
  std::string message = state_message(report);
  EXPECT_THAT(message, HasSubstr("not installed"));
  EXPECT_THAT(message, HasSubstr("nvidia-driver"));
  EXPECT_THAT(message, HasSubstr("ldconfig -p | grep nvidia-ml"));
  // A later probe retries rather than caching the failure.
  EXPECT_EQ(inventory->probe().state, InventoryState::kNoLibrary);
}

TEST(NvmlInventory, StubWithoutKernelDriverIsNoDriver) {
  InventoryReport report = make_nvml_inventory(NVML_STUB_NO_DRIVER_PATH)->probe();
  EXPECT_EQ(report.state, InventoryState::kNoDriver);
  EXPECT_EQ(state_exit_code(report.state), 11);
  EXPECT_THAT(report.detail, HasSubstr("Driver Not Loaded"));
  EXPECT_THAT(state_message(report), HasSubstr("modprobe nvidia"));
  EXPECT_THAT(state_message(report), HasSubstr("nvidia-smi"));
}

TEST(NvmlInventory, StubWithoutDevicesIsNoDevices) {
  InventoryReport report = make_nvml_inventory(NVML_STUB_NO_DEVICES_PATH)->probe();
  EXPECT_EQ(report.state, InventoryState::kNoDevices);
  EXPECT_EQ(state_exit_code(report.state), 12);
  EXPECT_TRUE(report.devices.empty());
  EXPECT_EQ(report.driver_version, "550.54.15");
  EXPECT_EQ(stub_init_count(NVML_STUB_NO_DEVICES_PATH), 0) << "nvmlShutdown was not called";
}

TEST(NvmlInventory, StubWithTwoGpusReportsEveryField) {
  auto inventory = make_nvml_inventory(NVML_STUB_TWO_GPUS_PATH);
  InventoryReport report = inventory->probe();
  ASSERT_EQ(report.state, InventoryState::kOk) << report.detail;
  EXPECT_EQ(state_exit_code(report.state), 0);
  EXPECT_EQ(report.source, "nvml");
  EXPECT_EQ(report.library, NVML_STUB_TWO_GPUS_PATH);
  EXPECT_EQ(report.driver_version, "550.54.15");
  EXPECT_EQ(report.cuda_driver_version, "12.4");
  EXPECT_EQ(report.detail, "");
  EXPECT_EQ(report.devices, stub_two_gpus());
  EXPECT_EQ(stub_init_count(NVML_STUB_TWO_GPUS_PATH), 0) << "nvmlShutdown was not called";
  EXPECT_THAT(state_message(report), HasSubstr("2 GPUs"));

  // Probing again gives the same answer: nothing is left half-initialised.
  EXPECT_EQ(inventory->probe(), report);

  auto parsed = report_from_json(nlohmann::json::parse(to_json(report).dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(*parsed, report);
}

TEST(NvmlInventory, ConcurrentProbesAreSerialised) {
  auto inventory = make_nvml_inventory(NVML_STUB_TWO_GPUS_PATH);
  std::vector<std::thread> threads;
  std::vector<InventoryState> states(4, InventoryState::kError);
  for (size_t t = 0; t < states.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) states[t] = inventory->probe().state;
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto state : states) EXPECT_EQ(state, InventoryState::kOk);
  EXPECT_EQ(stub_init_count(NVML_STUB_TWO_GPUS_PATH), 0);
}

TEST(NvmlInventory, OperatingSystemErrorIsBlockedByOs) {
  InventoryReport report = make_nvml_inventory(NVML_STUB_BLOCKED_BY_OS_PATH)->probe();
  EXPECT_EQ(report.state, InventoryState::kBlockedByOs);
  EXPECT_EQ(state_exit_code(report.state), 13);
  EXPECT_THAT(report.detail, HasSubstr("GPU access blocked by the operating system"));
  std::string message = state_message(report);
  EXPECT_THAT(message, HasSubstr("WSL"));
  EXPECT_THAT(message, HasSubstr("wsl --update"));
  EXPECT_THAT(message, HasSubstr("/usr/lib/wsl/lib/libnvidia-ml.so.1"));
}

TEST(NvmlInventory, MissingSymbolIsErrorNamingIt) {
  InventoryReport report = make_nvml_inventory(NVML_STUB_MISSING_SYMBOL_PATH)->probe();
  EXPECT_EQ(report.state, InventoryState::kError);
  EXPECT_EQ(state_exit_code(report.state), 14);
  EXPECT_THAT(report.detail, HasSubstr("nvmlDeviceGetCudaComputeCapability"));
  EXPECT_THAT(state_message(report), HasSubstr("nvmlDeviceGetCudaComputeCapability"));
}

TEST(InventorySpec, FakeSpecsMakeClearlyFakeDevices) {
  auto two = make_inventory("fake:2");
  ASSERT_TRUE(two.ok()) << two.error().to_string();
  InventoryReport report = (*two)->probe();
  EXPECT_EQ(report.state, InventoryState::kOk);
  EXPECT_EQ(report.source, "fake");
  ASSERT_EQ(report.devices.size(), 2u);
  EXPECT_EQ(report.devices[0].name, "FAKE GPU");
  EXPECT_EQ(report.devices[0].uuid.rfind("GPU-fake-0000", 0), 0u);
  EXPECT_NE(report.devices[0].uuid, report.devices[1].uuid);
  EXPECT_EQ(report.devices[1].index, 1);
  EXPECT_THAT(state_message(report), HasSubstr("fake"));

  auto named = make_inventory("fake:3:A100-80GB:80");
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  report = (*named)->probe();
  ASSERT_EQ(report.devices.size(), 3u);
  EXPECT_EQ(report.devices[2].name, "FAKE A100-80GB");
  EXPECT_EQ(report.devices[2].memory_total_bytes, 80ULL << 30);

  auto none = make_inventory("fake:0");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->probe().state, InventoryState::kNoDevices);
}

TEST(InventorySpec, NvmlSpecsChooseTheLibrary) {
  auto default_library = make_inventory("nvml");
  ASSERT_TRUE(default_library.ok());
  auto custom = make_inventory("nvml:/nonexistent/libnvml-custom.so");
  ASSERT_TRUE(custom.ok());
  InventoryReport report = (*custom)->probe();
  EXPECT_EQ(report.state, InventoryState::kNoLibrary);
  EXPECT_EQ(report.library, "/nonexistent/libnvml-custom.so");
}

TEST(InventorySpec, BadSpecsListTheAcceptedForms) {
  for (const char* spec :
       {"", "gpu", "NVML", "nvml:", "fake", "fake:", "fake:-1", "fake:65", "fake:1x", "fake: 1",
        "fake:2:X", "fake:2:X:0", "fake:2:X:4097", "fake:2::8", "fake:2:a/b:8", "fake:2:X:8:9",
        "fake:2:X:8GiB"}) {
    auto result = make_inventory(spec);
    ASSERT_FALSE(result.ok()) << "accepted \"" << spec << "\"";
    EXPECT_EQ(result.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(result.error().message(), HasSubstr("fake:N:NAME:MEMGIB")) << spec;
    EXPECT_THAT(result.error().message(), HasSubstr("\"nvml\"")) << spec;
  }
}

TEST(InventoryState, NamesExitCodesAndMessagesAreDistinct) {
  const InventoryState states[] = {InventoryState::kOk,        InventoryState::kNoLibrary,
                                   InventoryState::kNoDriver,  InventoryState::kNoDevices,
                                   InventoryState::kBlockedByOs, InventoryState::kError};
  const char* names[] = {"ok", "no_library", "no_driver", "no_devices", "blocked_by_os", "error"};
  const int codes[] = {0, 10, 11, 12, 13, 14};
  std::vector<std::string> messages;
  for (size_t i = 0; i < std::size(states); ++i) {
    EXPECT_STREQ(state_name(states[i]), names[i]);
    EXPECT_EQ(state_exit_code(states[i]), codes[i]);
    InventoryReport report;
    report.state = states[i];
    report.source = "nvml";
    messages.push_back(state_message(report));
    EXPECT_FALSE(messages.back().empty());
    for (size_t j = 0; j < i; ++j) EXPECT_NE(messages[i], messages[j]);
  }
}

InventoryReport sample_report() {
  InventoryReport report;
  report.state = InventoryState::kOk;
  report.source = "nvml";
  report.library = "libnvidia-ml.so.1";
  report.driver_version = "550.54.15";
  report.cuda_driver_version = "12.4";
  report.devices = stub_two_gpus();
  report.devices[1].memory_total_bytes = (1ULL << 63) + 12345;  // above INT64_MAX
  report.detail = "nvmlShutdown: Unknown Error (code 999)";
  return report;
}

TEST(InventoryJson, RoundTripsEveryField) {
  InventoryReport report = sample_report();
  nlohmann::json json = to_json(report);
  EXPECT_EQ(json["state"], "ok");
  EXPECT_EQ(json["exit_code"], 0);
  EXPECT_EQ(json["message"], state_message(report));
  auto parsed = report_from_json(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(*parsed, report);

  for (InventoryState state : {InventoryState::kNoLibrary, InventoryState::kBlockedByOs}) {
    InventoryReport failed;
    failed.state = state;
    failed.source = "nvml";
    failed.detail = "some text";
    auto back = report_from_json(to_json(failed));
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, failed);
  }
}

TEST(InventoryJson, RejectsWrongShapesWithTheFieldName) {
  const nlohmann::json good = to_json(sample_report());
  struct Case {
    const char* field;  // expected in the error message
    nlohmann::json json;
  };
  std::vector<Case> cases;
  auto with = [&](const char* field, auto mutate) {
    nlohmann::json copy = good;
    mutate(copy);
    cases.push_back({field, std::move(copy)});
  };
  cases.push_back({"object", nlohmann::json::array()});
  cases.push_back({"object", "ok"});
  with("state", [](auto& j) { j.erase("state"); });
  with("state", [](auto& j) { j["state"] = "great"; });
  with("state", [](auto& j) { j["state"] = 0; });
  with("source", [](auto& j) { j["source"] = nullptr; });
  with("detail", [](auto& j) { j["detail"] = std::string(5000, 'x'); });
  with("devices", [](auto& j) { j["devices"] = nlohmann::json::object(); });
  with("devices", [](auto& j) { j.erase("devices"); });
  with("devices", [](auto& j) {
    j["devices"] = nlohmann::json::array();
    for (int i = 0; i < 257; ++i) j["devices"].push_back(i);
  });
  with("devices[0]", [](auto& j) { j["devices"][0] = "GPU-1"; });
  with("devices[0].uuid", [](auto& j) { j["devices"][0]["uuid"] = 7; });
  with("devices[1].name", [](auto& j) { j["devices"][1].erase("name"); });
  with("devices[0].index", [](auto& j) { j["devices"][0]["index"] = 1.5; });
  with("devices[0].index", [](auto& j) { j["devices"][0]["index"] = -1; });
  with("devices[0].memory_total_bytes",
       [](auto& j) { j["devices"][0]["memory_total_bytes"] = -1; });
  with("devices[0].memory_total_bytes",
       [](auto& j) { j["devices"][0]["memory_total_bytes"] = "80G"; });
  with("devices[0].memory_used_bytes",
       [](auto& j) { j["devices"][0]["memory_used_bytes"] = 1e9; });
  with("devices[0].utilization_percent",
       [](auto& j) { j["devices"][0]["utilization_percent"] = 101; });
  with("devices[0].compute_major",
       [](auto& j) { j["devices"][0]["compute_major"] = 18446744073709551615ULL; });
  with("devices[0].compute_minor", [](auto& j) { j["devices"][0]["compute_minor"] = true; });

  for (const auto& c : cases) {
    auto result = report_from_json(c.json);
    ASSERT_FALSE(result.ok()) << "accepted " << c.json.dump().substr(0, 200);
    EXPECT_EQ(result.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(result.error().message(), HasSubstr(c.field));
  }
}

TEST(InventoryJson, IgnoresDerivedAndUnknownKeys) {
  nlohmann::json json = to_json(sample_report());
  json["message"] = "stale text from an older version";
  json["exit_code"] = 99;
  json["future_field"] = {1, 2, 3};
  auto parsed = report_from_json(json);
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(*parsed, sample_report());
}

TEST(BlockedByOs, RecognisesNvidiaSmiWording) {
  EXPECT_TRUE(mentions_blocked_by_os(
      "Failed to initialize NVML: GPU access blocked by the operating system\n"
      "Failed to properly shut down NVML: GPU access blocked by the operating system\n"));
  EXPECT_TRUE(mentions_blocked_by_os("GPU ACCESS BLOCKED BY THE OPERATING SYSTEM"));
  EXPECT_FALSE(
      mentions_blocked_by_os("Failed to initialize NVML: Driver/library version mismatch"));
  EXPECT_FALSE(mentions_blocked_by_os("blocked by the operating"));
  EXPECT_FALSE(mentions_blocked_by_os(""));
}

}  // namespace
}  // namespace yonder::gpu

namespace yonder::gpu {
namespace {

// Per-process accounting through the stub's nvmlProcessInfo_t.
TEST(NvmlInventory, StubReportsComputeProcessesPerDevice) {
  auto processes = make_nvml_inventory(NVML_STUB_TWO_GPUS_PATH)->processes();
  ASSERT_TRUE(processes.ok()) << processes.error().to_string();
  std::vector<GpuProcess> want = {{"GPU-5a1b0000-0000-4000-8000-000000000001", 4242, 1ULL << 30},
                                  {"GPU-5a1b0000-0000-4000-8000-000000000001", 4343, 0}};
  EXPECT_EQ(*processes, want);
  EXPECT_EQ(stub_init_count(NVML_STUB_TWO_GPUS_PATH), 0) << "nvmlShutdown was not called";
  // A driver without the call cannot enforce VRAM limits, and says so.
  auto old = make_nvml_inventory(NVML_STUB_NO_DEVICES_PATH)->processes();
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message().find("update the NVIDIA driver"), std::string::npos) << old.error().message();
  EXPECT_FALSE(make_nvml_inventory("/nonexistent/libnvidia-ml.so.1")->processes().ok());
}

TEST(FakeInventory, SimulatesPerProcessUse) {
  FakeGpuInventory fake(2, "GPU", 24ULL << 30);
  EXPECT_TRUE(fake.processes()->empty());
  fake.simulate_process("GPU-fake-0000-0000-0000-000000000001", 7, 3ULL << 30);
  auto report = fake.probe();
  EXPECT_EQ(report.devices[1].memory_used_bytes, 3ULL << 30);
  EXPECT_EQ(report.devices[0].memory_used_bytes, 0u);
  EXPECT_EQ(fake.processes()->size(), 1u);
  fake.simulate_process("GPU-fake-0000-0000-0000-000000000001", 7, 0);
  EXPECT_TRUE(fake.processes()->empty());
}

}  // namespace
}  // namespace yonder::gpu
