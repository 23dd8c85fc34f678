#include "mesh/core/placement.h"

#include <algorithm>
#include <cmath>

#include "mesh/core/capacity.h"

namespace yonder::mesh {
namespace {

bool device_free(const GpuOffer& g, uint32_t index, const std::vector<uint32_t>& held) {
  return !g.leased && std::find(held.begin(), held.end(), index) == held.end();
}

// A newer advertisement wins; equal times: the larger signature, so the
// choice does not depend on input order.
bool newer(const Advertisement& a, const Advertisement& b) {
  if (a.issued_at_ms != b.issued_at_ms) return a.issued_at_ms > b.issued_at_ms;
  return b.signature < a.signature;
}

}  // namespace

std::optional<std::vector<uint32_t>> feasible_devices(const ProviderView& view, const std::vector<uint32_t>& held,
                                                      const PlacementRequest& job, UnixMs now_ms) {
  if (job.gpus == 0 || !advertisement_fresh(view.ad, now_ms)) return std::nullopt;
  if (job.group && std::find(view.groups.begin(), view.groups.end(), *job.group) == view.groups.end()) {
    return std::nullopt;
  }
  for (const auto& [k, v] : job.labels) {
    auto it = view.ad.labels.find(k);
    if (it == view.ad.labels.end() || it->second != v) return std::nullopt;
  }
  std::vector<uint32_t> devices;
  for (uint32_t i = 0; i < view.ad.gpus.size() && devices.size() < job.gpus; ++i) {
    const auto& g = view.ad.gpus[i];
    if (device_free(g, i, held) && g.memory_bytes >= job.vram_bytes && g.capability() >= job.min_capability) {
      devices.push_back(i);
    }
  }
  if (devices.size() < job.gpus) return std::nullopt;
  return devices;
}

PlacementIndex::PlacementIndex(const Snapshot& snapshot, const Weights& w) : now_ms_(snapshot.now_ms) {
  std::map<PeerKey, const ProviderView*> newest;
  for (const auto& v : snapshot.providers) {
    auto [it, inserted] = newest.emplace(v.ad.provider, &v);
    if (!inserted && newer(v.ad, it->second->ad)) it->second = &v;
  }
  std::map<PeerKey, std::vector<uint32_t>> held;
  for (const auto& l : snapshot.leases) {
    auto& h = held[l.provider];
    h.insert(h.end(), l.devices.begin(), l.devices.end());
  }
  entries_.reserve(newest.size());
  for (const auto& [key, view] : newest) {
    if (!advertisement_fresh(view->ad, now_ms_)) continue;  // never feasible in this snapshot
    Entry e{view, {}, 0, 0, 0, 0, 0};
    if (auto h = held.find(key); h != held.end()) e.held = h->second;
    for (uint32_t i = 0; i < view->ad.gpus.size(); ++i) {
      const auto& g = view->ad.gpus[i];
      if (!device_free(g, i, e.held)) continue;
      ++e.free_count;
      e.best_capability = std::max(e.best_capability, g.capability());
      e.best_memory = std::max(e.best_memory, g.memory_bytes);
    }
    if (e.free_count == 0) continue;
    e.expected_start_s = view->ad.queue_depth * w.seconds_per_queued_job / e.free_count;
    e.score = score_parts(*view, e.expected_start_s, w).total;
    entries_.push_back(std::move(e));
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.view->ad.provider < b.view->ad.provider;
  });
  for (uint32_t pos = 0; pos < entries_.size(); ++pos) {
    const auto& ad = entries_[pos].view->ad;
    for (const auto& [k, v] : ad.labels) by_label_[k + "=" + v].push_back(pos);
    for (const auto& g : entries_[pos].view->groups) {
      auto& list = by_group_[g];
      if (list.empty() || list.back() != pos) list.push_back(pos);
    }
  }
}

bool PlacementIndex::try_entry(const Entry& e, const PlacementRequest& job, Plan& plan) const {
  // Cheap rejections before the per-device walk.
  if (e.free_count < job.gpus || e.best_capability < job.min_capability || e.best_memory < job.vram_bytes) {
    return false;
  }
  auto devices = feasible_devices(*e.view, e.held, job, now_ms_);
  if (!devices) return false;
  plan.ranked.push_back(Candidate{e.view->ad.provider, e.score, e.expected_start_s, std::move(*devices)});
  return true;
}

Plan PlacementIndex::place(const PlacementRequest& job) const {
  Plan plan;
  if (job.max_candidates == 0 || job.gpus == 0) return plan;
  // The shortest score-ordered list every feasible provider must be on.
  const std::vector<uint32_t>* list = nullptr;
  auto consider = [&](const std::map<std::string, std::vector<uint32_t>>& m, const std::string& key) {
    auto it = m.find(key);
    static const std::vector<uint32_t> kEmpty;
    const auto* l = it == m.end() ? &kEmpty : &it->second;
    if (list == nullptr || l->size() < list->size()) list = l;
  };
  for (const auto& [k, v] : job.labels) consider(by_label_, k + "=" + v);
  if (job.group) consider(by_group_, *job.group);
  if (list == nullptr) {
    for (const auto& e : entries_) {
      if (try_entry(e, job, plan) && plan.ranked.size() == job.max_candidates) break;
    }
  } else {
    for (uint32_t pos : *list) {
      if (try_entry(entries_[pos], job, plan) && plan.ranked.size() == job.max_candidates) break;
    }
  }
  return plan;
}

Plan place(const Snapshot& snapshot, const PlacementRequest& job, const Weights& w) {
  return PlacementIndex(snapshot, w).place(job);
}

}  // namespace yonder::mesh
