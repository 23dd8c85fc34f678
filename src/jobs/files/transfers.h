// Transfers the consumer's daemon does on its CLI's behalf (workspace
// uploads, outputs coming home), with their progress, so a CLI can draw a
// progress bar while its request runs and `yonder transfers` can list them:
//
//   GET  /v1/transfers[?id=ID]      -> {"transfers": [progress...]}
//   POST /v1/transfers/cancel {"id"} -> the transfer, cancel_requested set
//
// Cancelling (`yonder run`'s Ctrl-C while it submits) never leaves a job in
// an unknown state: an upload stops and nothing is submitted; if the submit
// was already on its way, the job is stopped as soon as its id is known. A
// transfer asked for by id stays listed for two minutes after its end, with
// its "outcome" ("submitted", "cancelled", "stopped", "failed") and job id.
//
// The caller names a transfer ("transfer_id" in the request that starts
// it, at most 64 characters); it is listed from start to end.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "api/server.h"

namespace yonder::jobs::files {

// One transfer's progress; written by the transfer, read by the API (any thread).
struct TransferProgress {
  enum class Phase : int { kWaiting, kListing, kHashing, kPlanning, kSending, kReceiving, kFinishing, kRetrying, kDone, kFailed };
  std::string id, kind, peer, dir;  // kind: "upload" or "download"
  std::atomic<Phase> phase{Phase::kListing};
  std::atomic<uint64_t> files{0}, bytes{0}, hashed_bytes{0};
  // need_*: what crosses the link (all of a download; what the provider lacks of an upload).
  std::atomic<uint64_t> need_files{0}, need_bytes{0}, sent_bytes{0};
  std::atomic<int> attempt{0};
  int64_t started_ms = 0;
  std::atomic<bool> cancel_requested{false};
  // Event loop only: how the transfer is cut short (set by the transfer),
  // and how it ended.
  std::function<void()> on_cancel;
  std::string outcome, job_id, error;
  nlohmann::json to_json() const;
};

class Transfers {
 public:
  // A new transfer under the caller's id (or a generated one when it is
  // empty or too long); listed until end() is called with it.
  std::shared_ptr<TransferProgress> begin(const std::string& requested_id, const std::string& kind,
                                          const std::string& peer, const std::string& dir);
  // Event loop. `outcome`: "submitted", "cancelled", "stopped", "failed", "done".
  void end(const std::shared_ptr<TransferProgress>& p, const std::string& outcome = "done");
  nlohmann::json list(const std::string& id) const;
  // Event loop: kNotFound when no transfer has that id.
  Result<nlohmann::json> cancel(const std::string& id);
  void add_routes(api::Router& router);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<TransferProgress>> live_;
  // Ended, by id, with when they ended: kept for two minutes.
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::shared_ptr<TransferProgress>>> recent_;
  uint64_t next_ = 0;
};

}  // namespace yonder::jobs::files
