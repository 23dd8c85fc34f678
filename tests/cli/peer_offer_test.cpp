// `yonder gpu PEER`'s text from a provider's run.offer answer.
#include "cli/peer_offer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "crypto/scope.h"
#include "gpu/inventory.h"

namespace yonder::cli {
namespace {

nlohmann::json offer_with(const gpu::InventoryReport& report) {
  Scope scope;
  scope.capabilities = static_cast<uint8_t>(Capability::kRun) | static_cast<uint8_t>(Capability::kExec);
  scope.gpus = 1;
  scope.vram_bytes = 20ULL << 30;
  return {{"name", "studio"},
          {"node_id", "3RTSVJG-AAAAAAA"},
          {"inventory", gpu::to_json(report)},
          {"leased", {{"GPU-b", true}}},
          {"limits",
           {{"max_cpus", 8.0}, {"max_memory_mib", 16384}, {"max_disk_mib", 102400}, {"max_wall_time_s", 86400},
            {"egress", false}}},
          {"images", {"docker.io/pytorch/pytorch:*", "docker.io/library/debian:12"}},
          {"scope", scope_to_json(scope)},
          {"running", 1},
          {"queued", 2},
          {"max_concurrent", 4},
          {"max_per_peer", 2}};
}

gpu::InventoryReport two_gpus() {
  gpu::InventoryReport r;
  r.state = gpu::InventoryState::kOk;
  r.source = "nvml";
  r.driver_version = "550.54.15";
  r.cuda_driver_version = "12.4";
  for (int i = 0; i < 2; ++i) {
    gpu::GpuDevice d;
    d.index = i;
    d.uuid = i == 0 ? "GPU-a" : "GPU-b";
    d.name = "NVIDIA GeForce RTX 4090";
    d.memory_total_bytes = 24ULL << 30;
    d.memory_used_bytes = i == 0 ? 2ULL << 30 : 20ULL << 30;
    d.utilization_percent = i == 0 ? 3 : 97;
    r.devices.push_back(d);
  }
  return r;
}

TEST(OfferText, ShowsEachGpuWithFreeVramAndWhetherAJobHoldsIt) {
  std::string text = offer_text(offer_with(two_gpus()));
  EXPECT_NE(text.find("studio (3RTSVJG): driver 550.54.15, CUDA 12.4"), std::string::npos) << text;
  EXPECT_NE(text.find("0    NVIDIA GeForce RTX 4090      22.0 / 24.0 GiB      3%    free"), std::string::npos) << text;
  EXPECT_NE(text.find("1    NVIDIA GeForce RTX 4090      4.0 / 24.0 GiB       97%   in use by a job"),
            std::string::npos)
      << text;
}

TEST(OfferText, ASharedGpuSaysWhatItsSharesHoldOfWhatTheyMayTake) {
  auto offer = offer_with(two_gpus());
  offer["shareable"] = {{"GPU-a", {{"max_jobs", 4}, {"vram_bytes", 22ULL << 30}}}};
  offer["shared"] = {{"GPU-a", {{"jobs", 2}, {"vram_bytes", 12ULL << 30}}}};
  std::string text = offer_text(offer);
  EXPECT_NE(text.find("3%    shared: 2 of 4 jobs, 12.0 of 22.0 GiB (--vram SIZE)"), std::string::npos) << text;
  offer.erase("shared");  // none placed yet
  text = offer_text(offer);
  EXPECT_NE(text.find("shared: 0 of 4 jobs, 0.0 of 22.0 GiB"), std::string::npos) << text;
}

TEST(OfferText, SaysWhatWeMayDoThePerJobMaximaTheImagesAndTheQueue) {
  std::string text = offer_text(offer_with(two_gpus()));
  EXPECT_NE(text.find("We may:   run,exec; 1 GPU, 20 GiB VRAM, 2h, 1 job, no egress"), std::string::npos) << text;
  EXPECT_NE(text.find("Per job:  up to 8 CPUs, 16 GiB memory, 100 GiB disk, 1d; no egress"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Images:   docker.io/pytorch/pytorch:*, docker.io/library/debian:12"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Queue:    1 running, 2 waiting (at most 4 at once, 2 per peer)"), std::string::npos) << text;
}

TEST(OfferText, AProviderWithoutGpusSaysWhyAndAFakeInventoryIsMarked) {
  gpu::InventoryReport none;
  none.state = gpu::InventoryState::kNoLibrary;
  none.source = "nvml";
  std::string text = offer_text(offer_with(none));
  EXPECT_NE(text.find("studio has no GPU to lend (no_library)"), std::string::npos) << text;
  auto fake = two_gpus();
  fake.source = "fake";
  EXPECT_NE(offer_text(offer_with(fake)).find("FAKE inventory"), std::string::npos);
}

TEST(OfferText, WhatTheProviderChoseCannotDriveTheTerminal) {
  auto report = two_gpus();
  report.devices[0].name = "RTX\x1b]0;owned\x07";
  auto offer = offer_with(report);
  offer["images"] = {"evil\x1b[2J"};
  std::string text = offer_text(offer);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
}

}  // namespace
}  // namespace yonder::cli
