#include "cli/peer_offer.h"

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/terminal_text.h"
#include "crypto/scope.h"
#include "gpu/inventory.h"

namespace yonder::cli {
namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string field(const nlohmann::json& j, const char* key, const std::string& absent) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return absent;
  return terminal_safe(j[key].get<std::string>());
}

int64_t number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<int64_t>();
}

}  // namespace

std::string offer_text(const nlohmann::json& offer) {
  std::string out;
  char line[512];
  std::string name = field(offer, "name", "?");
  std::string id = field(offer, "node_id", "");
  const nlohmann::json inventory = offer.contains("inventory") ? offer["inventory"] : nlohmann::json();
  auto report = gpu::report_from_json(inventory);
  if (!report) {
    out += name + " sent a GPU report this version cannot read: " + report.error().message() + "\n";
  } else if (report->state != gpu::InventoryState::kOk) {
    out += name + " has no GPU to lend (" + gpu::state_name(report->state) + "): " +
           terminal_safe(gpu::state_message(*report)) + "\n";
  } else {
    std::snprintf(line, sizeof line, "%s (%s): driver %s, CUDA %s%s\n", name.c_str(), id.substr(0, 7).c_str(),
                  report->driver_version.empty() ? "-" : terminal_safe(report->driver_version).c_str(),
                  report->cuda_driver_version.empty() ? "-" : terminal_safe(report->cuda_driver_version).c_str(),
                  report->source == "fake" ? " (FAKE inventory for tests: these GPUs do not exist)" : "");
    out += line;
    auto object = [&](const char* key) {
      return offer.contains(key) && offer[key].is_object() ? offer[key] : nlohmann::json::object();
    };
    const nlohmann::json leased = object("leased"), shared = object("shared"), shareable = object("shareable");
    std::snprintf(line, sizeof line, "%-4s %-28s %-20s %-5s %s\n", "GPU", "MODEL", "VRAM FREE / TOTAL", "UTIL",
                  "NOW");
    out += line;
    for (const auto& d : report->devices) {
      uint64_t free_bytes = d.memory_total_bytes > d.memory_used_bytes ? d.memory_total_bytes - d.memory_used_bytes : 0;
      std::string vram = gib(free_bytes) + " / " + gib(d.memory_total_bytes) + " GiB";
      std::string util = d.utilization_percent < 0 ? "-" : std::to_string(d.utilization_percent) + "%";
      std::string now = leased.contains(d.uuid) ? "in use by a job" : "free";
      if (shareable.contains(d.uuid) && shareable[d.uuid].is_object()) {
        // gpu.share: what shares may take, and what they hold now.
        const auto& lent = shareable[d.uuid];
        uint64_t taken = 0, jobs = 0;
        if (shared.contains(d.uuid) && shared[d.uuid].is_object()) {
          taken = static_cast<uint64_t>(number(shared[d.uuid], "vram_bytes"));
          jobs = static_cast<uint64_t>(number(shared[d.uuid], "jobs"));
        }
        now = "shared: " + std::to_string(jobs) + " of " + std::to_string(number(lent, "max_jobs")) + " jobs, " +
              gib(taken) + " of " + gib(static_cast<uint64_t>(number(lent, "vram_bytes"))) + " GiB (--vram SIZE)";
      }
      std::snprintf(line, sizeof line, "%-4d %-28s %-20s %-5s %s\n", d.index, terminal_safe(d.name).c_str(),
                    vram.c_str(), util.c_str(), now.c_str());
      out += line;
    }
  }
  if (offer.contains("scope") && offer["scope"].is_object()) {
    auto scope = scope_from_json(offer["scope"]);
    out += "We may:   " + (scope ? scope->summary() : std::string("(a scope this version cannot read)")) + "\n";
  }
  if (offer.contains("limits") && offer["limits"].is_object()) {
    const auto& l = offer["limits"];
    double cpus = l.contains("max_cpus") && l["max_cpus"].is_number() ? l["max_cpus"].get<double>() : 0;
    std::snprintf(line, sizeof line, "Per job:  up to %g CPUs, %s memory, %s disk, %s%s\n", cpus,
                  format_size(static_cast<uint64_t>(number(l, "max_memory_mib")) << 20).c_str(),
                  format_size(static_cast<uint64_t>(number(l, "max_disk_mib")) << 20).c_str(),
                  format_duration(static_cast<uint64_t>(number(l, "max_wall_time_s"))).c_str(),
                  l.value("egress", false) ? "; egress allowed" : "; no egress");
    out += line;
  }
  if (offer.contains("images") && offer["images"].is_array()) {
    std::string images;
    for (const auto& i : offer["images"]) {
      if (!i.is_string()) continue;
      images += (images.empty() ? "" : ", ") + terminal_safe(i.get<std::string>());
    }
    out += "Images:   " + (images.empty() ? std::string("none listed") : images) + "\n";
  }
  std::snprintf(line, sizeof line, "Queue:    %" PRId64 " running, %" PRId64 " waiting (at most %" PRId64
                                   " at once, %" PRId64 " per peer)\n",
                number(offer, "running"), number(offer, "queued"), number(offer, "max_concurrent"),
                number(offer, "max_per_peer"));
  out += line;
  if (offer.contains("notice") && offer["notice"].is_string()) {
    out += "Note:     " + terminal_safe(offer["notice"].get<std::string>()) + "\n";
  }
  return out;
}

}  // namespace yonder::cli
