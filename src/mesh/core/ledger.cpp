#include "mesh/core/ledger.h"

#include <algorithm>
#include <cmath>

namespace yonder::mesh {

Ledger::Ledger(PeerKey self, CreditParams params) : self_(self), params_(std::move(params)) {}

double Ledger::factor(const std::string& model) const {
  auto it = params_.model_factors.find(model);
  return it == params_.model_factors.end() ? params_.default_factor : it->second;
}

Status Ledger::add(const Receipt& r) {
  YONDER_TRY(verify_receipt(r));
  if (r.provider != self_ && r.consumer != self_) {
    return make_error(ErrorCode::kFailedPrecondition, "receipt " + r.job_id + " is between two other peers");
  }
  if (!counted_.emplace(r.provider, r.job_id).second) {
    return make_error(ErrorCode::kAlreadyExists, "receipt " + r.job_id + " was already counted");
  }
  double amount = factor(r.gpu_model) * static_cast<double>(credited_gpu_seconds(r));
  if (r.provider == self_) {
    auto& a = accounts_[r.consumer];
    a.taken += amount;
    a.last_ms = std::max(a.last_ms, r.end_ms);
    ++a.receipts;
  } else {
    auto& a = accounts_[r.provider];
    a.given += amount;
    a.last_ms = std::max(a.last_ms, r.end_ms);
    ++a.receipts;
  }
  return ok_status();
}

std::map<PeerKey, Ledger::PeerTotals> Ledger::totals() const {
  std::map<PeerKey, PeerTotals> out;
  for (const auto& [peer, a] : accounts_) out[peer] = PeerTotals{a.given, a.taken, a.last_ms, a.receipts};
  return out;
}

double Ledger::net(const PeerKey& peer) const {
  auto it = accounts_.find(peer);
  return it == accounts_.end() ? 0.0 : it->second.given - it->second.taken;
}

double Ledger::balance(const PeerKey& peer, UnixMs now_ms) const {
  auto it = accounts_.find(peer);
  if (it == accounts_.end()) return params_.starting_allowance;
  double net = it->second.given - it->second.taken;
  UnixMs idle = now_ms - it->second.last_ms - params_.idle_after_ms;
  if (idle > 0 && params_.half_life_ms > 0) {
    net *= std::exp2(-static_cast<double>(idle) / static_cast<double>(params_.half_life_ms));
  }
  return params_.starting_allowance + net;
}

std::vector<QueuedRequest> order_queue(std::vector<QueuedRequest> queue, const Ledger& ledger, UnixMs now_ms) {
  auto tier = [&](const PeerKey& p) {
    double b = ledger.balance(p, now_ms);
    if (ledger.net(p) > 0 && b > 0) return 0;
    if (b > 0) return 1;
    return 2;
  };
  std::vector<std::pair<int, QueuedRequest>> keyed;
  keyed.reserve(queue.size());
  for (auto& q : queue) keyed.emplace_back(tier(q.consumer), q);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second.arrived_ms != b.second.arrived_ms) return a.second.arrived_ms < b.second.arrived_ms;
    return a.second.request_id < b.second.request_id;
  });
  for (size_t i = 0; i < keyed.size(); ++i) queue[i] = keyed[i].second;
  return queue;
}

}  // namespace yonder::mesh
