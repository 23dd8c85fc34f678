#include "mesh/core/reputation.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace yonder::mesh {

double TrustResult::normalised(const PeerKey& p) const {
  double max = 0;
  for (const auto& [k, v] : global) max = std::max(max, v);
  auto it = global.find(p);
  if (it == global.end() || max <= 0) return 0;
  return it->second / max;
}

TrustResult compute_trust(const std::vector<Receipt>& receipts, const std::vector<VerificationOutcome>& outcomes,
                          const std::vector<PeerKey>& pre_trusted, const TrustParams& params) {
  // Peers in key order: the index of a peer does not depend on input order.
  std::set<PeerKey> peer_set(pre_trusted.begin(), pre_trusted.end());
  std::map<std::pair<PeerKey, PeerKey>, double> sat;
  std::set<std::pair<PeerKey, std::string>> seen;
  for (const auto& r : receipts) {
    if (!verify_receipt(r).ok() || !seen.emplace(r.provider, r.job_id).second) continue;
    sat[{r.consumer, r.provider}] +=
        std::min(static_cast<double>(credited_gpu_seconds(r)), std::max(0.0, params.max_receipt_gpu_seconds));
    peer_set.insert(r.consumer);
    peer_set.insert(r.provider);
  }
  for (const auto& o : outcomes) {
    if (o.judge == o.provider || (o.agreed && !o.known_answer)) continue;
    sat[{o.judge, o.provider}] += o.agreed ? params.benchmark_pass_gpu_seconds : -params.penalty_gpu_seconds;
    peer_set.insert(o.judge);
    peer_set.insert(o.provider);
  }
  std::vector<PeerKey> peers(peer_set.begin(), peer_set.end());
  size_t n = peers.size();
  TrustResult out;
  if (n == 0) return out;
  auto index = [&](const PeerKey& k) {
    return static_cast<size_t>(std::lower_bound(peers.begin(), peers.end(), k) - peers.begin());
  };
  std::vector<double> p(n, 0.0);
  std::set<PeerKey> pre(pre_trusted.begin(), pre_trusted.end());
  for (const auto& k : pre) p[index(k)] = 1.0 / static_cast<double>(pre.size());
  if (pre.empty()) std::fill(p.begin(), p.end(), 1.0 / static_cast<double>(n));

  // Sparse rows of C: row i = (j, c_ij).
  std::vector<std::vector<std::pair<size_t, double>>> rows(n);
  for (const auto& [edge, s] : sat) {
    if (s > 0 && edge.first != edge.second) rows[index(edge.first)].emplace_back(index(edge.second), s);
  }
  for (auto& row : rows) {
    double sum = 0;
    for (const auto& [j, s] : row) sum += s;
    for (auto& [j, s] : row) s /= sum;
  }
  std::vector<double> t = p, next(n);
  for (out.iterations = 1; out.iterations <= params.max_iterations; ++out.iterations) {
    std::fill(next.begin(), next.end(), 0.0);
    for (size_t i = 0; i < n; ++i) {
      if (rows[i].empty()) {
        for (size_t j = 0; j < n; ++j) next[j] += t[i] * p[j];
      } else {
        for (const auto& [j, c] : rows[i]) next[j] += t[i] * c;
      }
    }
    double delta = 0;
    for (size_t j = 0; j < n; ++j) {
      next[j] = (1 - params.damping) * next[j] + params.damping * p[j];
      delta += std::fabs(next[j] - t[j]);
    }
    t.swap(next);
    if (delta < params.tolerance) {
      out.converged = true;
      break;
    }
  }
  out.iterations = std::min(out.iterations, params.max_iterations);
  for (size_t i = 0; i < n; ++i) out.global[peers[i]] = t[i];
  return out;
}

}  // namespace yonder::mesh
