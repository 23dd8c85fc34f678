// Transfers the consumer's daemon does on its CLI's behalf (workspace
// uploads, outputs coming home), with their progress, so a CLI can draw a
// progress bar while its request runs and `yonder transfers` can list them:
//
//   GET /v1/transfers[?id=ID]  -> {"transfers": [progress...]}
//
// The caller names a transfer ("transfer_id" in the request that starts
// it, at most 64 characters); it is listed from start to end.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "api/server.h"

namespace yonder::node {

// One transfer's progress; written by the transfer, read by the API (any thread).
struct TransferProgress {
  enum class Phase : int { kListing, kHashing, kPlanning, kSending, kReceiving, kFinishing, kRetrying, kDone, kFailed };
  std::string id, kind, peer, dir;  // kind: "upload" or "download"
  std::atomic<Phase> phase{Phase::kListing};
  std::atomic<uint64_t> files{0}, bytes{0}, hashed_bytes{0};
  // need_*: what crosses the link (all of a download; what the provider lacks of an upload).
  std::atomic<uint64_t> need_files{0}, need_bytes{0}, sent_bytes{0};
  std::atomic<int> attempt{0};
  int64_t started_ms = 0;
  nlohmann::json to_json() const;
};

class Transfers {
 public:
  // A new transfer under the caller's id (or a generated one when it is
  // empty or too long); listed until end() is called with it.
  std::shared_ptr<TransferProgress> begin(const std::string& requested_id, const std::string& kind,
                                          const std::string& peer, const std::string& dir);
  void end(const std::shared_ptr<TransferProgress>& p);
  nlohmann::json list(const std::string& id) const;
  void add_routes(api::Router& router);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<TransferProgress>> live_;
  uint64_t next_ = 0;
};

}  // namespace yonder::node
