// The node's credits: a mesh::Ledger rebuilt from the receipts
// both sides countersigned (jobs/receipts/receipt_store.h), the per-peer
// report behind GET /v1/credits, and the provider's tit-for-tat queue order
// (mesh::order_queue) for ProviderJobs::set_queue_order.
//
// Parameters come from the config (credits.*, docs/config.md). A stored
// receipt that does not verify is not counted; the reason is logged once
// and shown by GET /v1/receipts?verify=1.
//
// Threading: every method may be called from any thread; reload() blocks
// (SQLite): worker threads only. order() never blocks on the disk (it reads
// the ledger built by the last reload), so the job manager may call it
// under its lock.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "jobs/provider/provider_jobs.h"
#include "jobs/receipts/receipt_store.h"
#include "mesh/core/ledger.h"

namespace yonder::jobs::metering {

// credits.* settings -> parameters; kInvalidArgument naming the bad setting.
Result<mesh::CreditParams> credit_params_from_config(const config::Config& cfg);

class Credits {
 public:
  Credits(mesh::PeerKey self, mesh::CreditParams params, jobs::receipts::ReceiptStore& store, bool order_queue);

  // Rebuilds the ledger from the countersigned receipts (blocking).
  Status reload();
  // {"peers": [{"peer_id", "given", "taken", "net", "balance", "receipts",
  //  "given_gpu_seconds", "taken_gpu_seconds"}], "params": {...}} at now_ms.
  nlohmann::json report(mesh::UnixMs now_ms) const;
  // Why a countersigned receipt was not counted ("" when it was), by (provider id, job id).
  std::string problem(const std::string& provider_id, const std::string& job_id) const;
  // The queue in tit-for-tat order (mesh::order_queue), for the job manager.
  std::vector<std::string> order(const std::vector<jobs::provider::ProviderJobs::QueuedJob>& queue) const;
  bool orders_queue() const { return order_queue_; }

 private:
  struct Raw {
    uint64_t given = 0;  // GPU-seconds before the model factor
    uint64_t taken = 0;
  };
  mesh::PeerKey self_;
  mesh::CreditParams params_;
  jobs::receipts::ReceiptStore& store_;
  bool order_queue_;
  mutable std::mutex mutex_;  // guards what follows
  mesh::Ledger ledger_;
  std::map<mesh::PeerKey, Raw> raw_;
  std::map<std::pair<std::string, std::string>, std::string> problems_;
  std::set<std::pair<std::string, std::string>> warned_;
};

}  // namespace yonder::jobs::metering
