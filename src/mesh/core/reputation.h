// Reputation: EigenTrust (Kamvar, Schlosser, Garcia-Molina, "The EigenTrust
// Algorithm for Reputation Management in P2P Networks", WWW 2003), over a
// group's receipts and verification outcomes.
//
// Local trust: consumer i's satisfaction with provider j is the normalised
// GPU-seconds j served i (verified, countersigned receipts: i vouched for
// them; the consumer's own figure when it countersigned less, and at most
// max_receipt_gpu_seconds from any one receipt, so a few huge receipts
// weigh no more than as many ordinary ones) minus penalty_gpu_seconds for
// every verification in which i saw j outvoted, saw fail a known-answer
// benchmark, or disputed j's receipt (metering.h), plus
// benchmark_pass_gpu_seconds for every benchmark i saw j pass (a correct
// answer is a little evidence on its own, even for a job too short to
// leave GPU-seconds in its receipt); s_ij = max(0, that), c_ij = s_ij / sum_j s_ij, and a peer with
// no positive opinion trusts the pre-trusted peers (c_i = p).
// Global trust: t <- (1 - a) C^T t + a p, from t = p, until the L1 change is
// below tolerance (or max_iterations): p is uniform over the pre-trusted
// peers (the group's owner and admins), a the damping.
//
// Why a clique gains nothing: trust flows only along edges from peers that
// already have trust, starting from p. Receipts that clique members sign
// among themselves give them edges only from each other; with no honest
// peer vouching for them, the flow into the clique is zero and their global
// trust stays at (about) zero, whatever the volume they fake.
#pragma once

#include <map>
#include <vector>

#include "mesh/core/receipt.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

struct TrustParams {
  double damping = 0.15;    // a: weight of the pre-trusted distribution
  double tolerance = 1e-9;  // stop when sum |t' - t| < tolerance
  int max_iterations = 200;
  double penalty_gpu_seconds = 3600.0;  // one outvoted replica costs an hour of served work
  double benchmark_pass_gpu_seconds = 60.0;  // one passed known-answer benchmark counts like a minute
  double max_receipt_gpu_seconds = 3600.0;   // the most one receipt adds: no more than one dispute takes away
};

struct VerificationOutcome {
  PeerKey judge{};  // the consumer that ran the replicas
  PeerKey provider{};
  bool agreed = true;  // false: outvoted (quorum.h), a failed benchmark, or a disputed receipt
  bool known_answer = false;  // a known-answer benchmark (agreed = passed), not a replica
};

struct TrustResult {
  std::map<PeerKey, double> global;  // sums to 1 over the peers seen
  int iterations = 0;
  bool converged = false;
  // global trust scaled so the highest is 1 (placement's 0..1 reputation)
  double normalised(const PeerKey& p) const;
};

// Receipts that do not verify are skipped. Deterministic: same inputs in any
// order give the same result.
TrustResult compute_trust(const std::vector<Receipt>& receipts, const std::vector<VerificationOutcome>& outcomes,
                          const std::vector<PeerKey>& pre_trusted, const TrustParams& params);

}  // namespace yonder::mesh
