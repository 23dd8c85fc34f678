// Metering receipts in SQLite (the v5 `receipts` table): one row per
// finished job this node ran for a peer (role provider) or ran on a peer
// (role consumer), keyed by (provider, job id). A receipt is written here
// before it leaves the node: the provider's before the consumer can fetch
// it, the consumer's countersigned one before the countersignature is sent.
//
// Threading: one connection, guarded inside; blocking (disk): worker
// threads only (the provider's job-end hook calls put() on the runner thread).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/strong_id.h"
#include "mesh/core/receipt.h"
#include "store/database.h"

namespace yonder::jobs::receipts {

// kRefused: not a receipt of this job at all (bad signature, another job);
// kDisputed: the provider's signed claim disagrees with what the consumer
// saw of the job (mesh/core/metering.h); neither is countersigned or counted.
enum class ReceiptState { kSigned, kCountersigned, kRefused, kDisputed };
const char* receipt_state_name(ReceiptState s);

struct StoredReceipt {
  std::string provider_id;  // node ids, display form
  std::string job_id;
  std::string consumer_id;
  bool we_provided = false;  // role: provider (true) or consumer
  ReceiptState state = ReceiptState::kSigned;
  std::string receipt_json;  // mesh::encode_receipt's form (as received, when refused)
  std::string problem;       // why it was refused or disputed
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

class ReceiptStore {
 public:
  static Result<std::unique_ptr<ReceiptStore>> open(const std::string& db_path);

  // Inserts or replaces the row of (provider_id, job_id).
  Status put(const StoredReceipt& r);
  Result<std::optional<StoredReceipt>> get(const PeerId& provider_id, const JobId& job_id);
  // Oldest first.
  Result<std::vector<StoredReceipt>> list();
  // The newest `limit` countersigned receipts, newest first (the evidence a
  // node hands its peers for reputation, mesh/consumer/mesh_opinions.h).
  Result<std::vector<StoredReceipt>> newest_countersigned(size_t limit);

 private:
  explicit ReceiptStore(store::Database db) : db_(std::move(db)) {}
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::jobs::receipts
