// The provider's side of metering: when a job a peer ran here
// ends, its receipt is built from the job's record (mesh/core/metering.h),
// signed and written to SQLite before the end is visible to anyone (the
// job manager's end hook runs under its lock); the consumer fetches it and
// sends its countersignature back over the link:
//
//   receipt.get         {"job_id"}             -> {"receipt": "<receipt JSON>", "state"}
//   receipt.pending     {}                     -> {"receipts": ["<receipt JSON>", ...]}
//                          the caller's receipts not yet countersigned (a
//                          consumer that was offline catches up with this)
//   receipt.countersign {"job_id", "receipt"}  -> {"state": "countersigned"}
//
// Any pinned peer may call these (no scope capability), but only about its
// own jobs: others' do not exist. A countersigned receipt that is not the
// one this provider signed, or whose signatures do not verify, is refused
// with the reason, logged and audited; it never reaches the credits.
//
// Threading: handlers run on the event loop; SQLite and the job manager on
// the pool. on_job_end runs on the job's runner thread (blocking).
#pragma once

#include <mutex>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "crypto/identity.h"
#include "jobs/metering/credits.h"
#include "jobs/provider/provider_service.h"
#include "jobs/provider/remote_provider.h"
#include "jobs/receipts/receipt_store.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::metering {

class ReceiptsProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "receipts (provider)"; }
  ReceiptsProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                   jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& remote,
                   const Identity& identity, jobs::receipts::ReceiptStore& store, Credits& credits);
  void register_methods() override;
  // A job ended (its final view): signs and stores its receipt. Blocking.
  void on_job_end(const nlohmann::json& view);

 private:
  // The stored receipt of a finished job, made and stored now if missing.
  Result<jobs::receipts::StoredReceipt> ensure(const nlohmann::json& view);
  Result<nlohmann::json> countersign(const PublicKeyBytes& peer, const nlohmann::json& params);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::ProviderService& provider_;
  jobs::provider::RemoteProvider& remote_;
  const Identity& identity_;
  std::string self_id_;
  jobs::receipts::ReceiptStore& store_;
  Credits& credits_;
  std::mutex mutex_;  // one ensure() at a time: a receipt is made once
};

}  // namespace yonder::jobs::metering
