// Credits: what each peer has given this node minus what it has taken, in
// normalised GPU-seconds, from verified receipts (receipt.h). Credits are
// local (each node keeps its own books about its peers) and not
// transferable. A provider orders its queue with them (order_queue):
// tit-for-tat, peers that contribute get served first.
//
//   balance(peer) = allowance + sum(factor(model) * gpu_seconds of receipts
//                   where peer provided to us)
//                 - sum(factor(model) * gpu_seconds where peer consumed from us)
// where, if no receipt with the peer for longer than idle_after_ms, the
// given-minus-taken part (credit or debt) halves every half_life_ms of
// further idleness: old favours and old debts fade, the allowance stays.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "mesh/core/receipt.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

struct CreditParams {
  // Credit a peer we have never dealt with starts with: an hour of a
  // reference GPU, so newcomers get served before they could contribute.
  double starting_allowance = 3600.0;
  // Balances untouched this long start to decay towards zero ...
  UnixMs idle_after_ms = 7ll * 24 * 3600 * 1000;
  // ... halving every this long.
  UnixMs half_life_ms = 30ll * 24 * 3600 * 1000;
  // GPU-seconds on model M count factor[M] reference GPU-seconds; a model
  // not in the table counts default_factor. The published table lives in
  // the config; these are examples.
  std::map<std::string, double> model_factors = {{"NVIDIA A100-SXM4-80GB", 2.0},
                                                 {"NVIDIA H100 80GB HBM3", 3.0},
                                                 {"NVIDIA GeForce RTX 4090", 1.0},
                                                 {"NVIDIA GeForce RTX 3090", 0.6},
                                                 {"Tesla T4", 0.25}};
  double default_factor = 0.5;
};

class Ledger {
 public:
  Ledger(PeerKey self, CreditParams params);

  // Counts a receipt between us and a peer once (by provider and job id).
  // kPermissionDenied/kInvalidArgument if it does not verify,
  // kFailedPrecondition if we are not a party, kAlreadyExists if counted.
  Status add(const Receipt& r);

  // The peer's balance at now_ms (allowance and decay included).
  double balance(const PeerKey& peer, UnixMs now_ms) const;
  // Net given minus taken, no allowance, no decay (for display).
  double net(const PeerKey& peer) const;
  double factor(const std::string& model) const;
  const CreditParams& params() const { return params_; }

  // Per peer with a counted receipt: normalised GPU-seconds it gave us and
  // took from us (no allowance, no decay), its last receipt's end, and how
  // many receipts were counted.
  struct PeerTotals {
    double given = 0;
    double taken = 0;
    UnixMs last_ms = 0;
    int receipts = 0;
  };
  std::map<PeerKey, PeerTotals> totals() const;

 private:
  struct Account {
    double given = 0;  // the peer provided to us
    double taken = 0;  // the peer consumed from us
    UnixMs last_ms = 0;
    int receipts = 0;
  };
  PeerKey self_;
  CreditParams params_;
  std::map<PeerKey, Account> accounts_;
  std::set<std::pair<PeerKey, std::string>> counted_;
};

struct QueuedRequest {
  uint64_t request_id = 0;
  PeerKey consumer{};
  UnixMs arrived_ms = 0;
};

// The provider's queue order, tit-for-tat: first peers that have given more
// than they took (net > 0), then peers still within their allowance
// (balance > 0), then the rest; within each tier by arrival, then request id.
std::vector<QueuedRequest> order_queue(std::vector<QueuedRequest> queue, const Ledger& ledger, UnixMs now_ms);

}  // namespace yonder::mesh
