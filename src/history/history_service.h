// The node's history as a daemon feature: every `interval` it measures its
// GPUs, the bytes of its link sessions per peer and the use of the jobs it
// runs for peers (history_core.h turns those into series values), stores
// them (history_store.h), prunes what is older than `keep`, and serves
// GET /v1/history for the dashboard's charts.
//
// The measuring is behind HistorySources, so the service runs the same on
// the daemon's loop and in a test with a manual clock and made-up readings.
// Time comes from the injected LoopTimers; blocking work (NVML, the engine,
// SQLite) runs on the `blocking` executor under one mutex.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "api/module.h"
#include "base/loop_timers.h"
#include "history/history_core.h"
#include "history/history_store.h"

namespace yonder::history {

struct HistorySources {
  // Blocking; called on the `blocking` executor.
  std::function<gpu::InventoryReport()> gpus;
  std::function<std::vector<JobUsage>()> jobs;
  // Cheap; called on the event loop.
  std::function<std::vector<PeerTraffic>()> traffic;
  std::function<std::map<std::string, std::string>()> peer_names;  // node id -> name
};

struct HistorySettings {
  std::chrono::seconds interval{10};          // history.interval_s
  std::chrono::seconds keep{24 * 3600};       // history.keep_h
  int64_t max_rows = 2'000'000;               // whatever runs, the table stays under this
  size_t max_jobs = 16;                       // running jobs measured per sample (each asks the engine)
};

class HistoryService : public api::Module {
 public:
  HistoryService(boost::asio::any_io_executor loop, boost::asio::any_io_executor blocking, LoopTimers& timers,
                 std::unique_ptr<HistoryStore> store, HistorySources sources, HistorySettings settings);
  ~HistoryService() override;

  std::string_view module_name() const override { return "history"; }
  void add_routes(api::Router& router) override;
  // Takes the first sample at once, then one every interval.
  Status start() override;
  void stop() override;

  // history.interval_s changed while running: the next sample comes one
  // new interval from now.
  void set_interval(std::chrono::seconds interval);

  // One sample now (what the timer does); `done` runs on the loop after it
  // is stored. For tests.
  void sample_now(std::function<void(Status)> done = nullptr);

 private:
  void schedule();
  struct Shared;
  boost::asio::any_io_executor loop_, blocking_;
  LoopTimers& timers_;
  HistorySources sources_;
  HistorySettings settings_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<LoopTimers::Timer> timer_;
  bool stopped_ = false;
  std::string last_failure_;  // the last sample's failure, logged once (event loop)
};

}  // namespace yonder::history
