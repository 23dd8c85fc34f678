// The consumer's side of metering. When a job submitted from
// here ends (RemoteConsumer sees it), its receipt is fetched from the
// provider (receipt.get), checked against what this node knows of the job
// (mesh::check_receipt_for_job: its own key, the job id, the provider's key
// and signature), then judged against what this node saw of the job itself
// (mesh::judge_receipt: its submit, the end it saw, the exit code it saw;
// jobs/consumer/consumer_jobs.h ConsumerObservation): countersigned as is,
// or with this node's smaller figures beside the provider's, written to
// SQLite, and the countersignature is sent back (receipt.countersign). A
// receipt that is not this job's is stored as refused with the reason; one
// whose claim disagrees with what was seen is stored as disputed and
// recorded as a signed verification against the provider (kind receipt,
// outcome disputed), which costs it reputation (mesh/core/reputation.h). Neither
// is countersigned or counted.
//
// Nothing is lost while this node is offline: a sweep asks each provider
// that ran a job of ours still lacking a receipt for the receipts it holds
// for us (receipt.pending) when yonderd starts, every few minutes while any
// is missing (credits.fetch_interval_s), and before GET /v1/credits and GET /v1/receipts answer.
//
// Local routes:
//   GET /v1/credits[?fetch=0]            per-peer balances (jobs/metering/credits.h)
//   GET /v1/receipts[?verify=1][&fetch=0] receipts on both sides, with their state
//
// Its clock and timer are injected (base/loop_timers.h), so it runs in the
// simulation (tests/sim/receipts_sim_test.cpp).
//
// Threading: public methods on the event loop; SQLite on the pool.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/any_io_executor.hpp>

#include "api/module.h"
#include "api/server.h"
#include "base/loop_timers.h"
#include "crypto/identity.h"
#include "jobs/metering/credits.h"
#include "jobs/receipts/receipt_store.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::jobs::metering {

class Verifications;

class ReceiptsConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "receipts (consumer)"; }
  // `blocking`: where SQLite runs (the daemon's pool). `timers` (the clock
  // receipts are judged by, the sweep's timer) and the rest outlive this.
  ReceiptsConsumer(boost::asio::io_context& io, boost::asio::any_io_executor blocking, LoopTimers& timers,
                   reach::Peers& link, const Identity& identity,
                   std::shared_ptr<jobs::consumer::ConsumerJobStore> jobs, jobs::receipts::ReceiptStore& store,
                   Credits& credits);
  ~ReceiptsConsumer();
  void add_routes(api::Router& router) override;
  // Where disputes are recorded (unset: they are only stored and logged).
  // Set before start(); must outlive this.
  void set_verifications(Verifications* verifications) { verifications_ = verifications; }
  // How often start()'s sweep timer looks for missing receipts: a first
  // sweep soon, then every `interval` (credits.fetch_interval_s); zero (the
  // default): no timer. Set before start().
  void set_sweep_interval(std::chrono::seconds interval) { interval_ = interval; }
  Status start() override;
  // A job submitted from here ended: fetch, check and countersign its receipt.
  void job_ended(const PeerId& provider_id, const JobId& job_id);
  // Asks the providers of jobs still lacking a receipt; `done` when all answered.
  void sweep(std::function<void()> done);

 private:
  // Checks, countersigns, stores (pool) and sends back (loop) one receipt from `t`.
  void process(const reach::Peers::Target& t, const std::string& text, std::function<void()> done);
  void schedule_sweep(std::chrono::seconds after);
  void credits(const api::Request& req, api::Reply reply);
  void receipts(const api::Request& req, api::Reply reply);
  // Runs `then` after a sweep, or at once with ?fetch=0.
  void maybe_sweep(const api::Request& req, std::function<void()> then);

  int64_t now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(timers_.now().time_since_epoch()).count();
  }

  boost::asio::io_context& io_;
  boost::asio::any_io_executor pool_;
  LoopTimers& timers_;
  reach::Peers& link_;
  const Identity& identity_;
  std::string self_id_;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> jobs_;
  jobs::receipts::ReceiptStore& store_;
  Credits& credits_;
  Verifications* verifications_ = nullptr;
  std::unique_ptr<LoopTimers::Timer> timer_;  // the next sweep
  std::chrono::seconds interval_{0};
  std::set<std::string> in_flight_;  // job ids being fetched (loop only)
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::jobs::metering
