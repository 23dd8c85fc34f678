// The history feature with a manual clock, made-up readings and a real
// database: it samples every interval, turns counters into rates, prunes
// by age and by its row cap, and GET /v1/history serves what it stored.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "api/server.h"
#include "history/history_service.h"
#include "store/migrations.h"
#include "support/manual_loop_timers.h"
#include "support/temp_dir.h"

namespace yonder::history {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Fixture {
  explicit Fixture(HistorySettings settings = {}) {
    db = dir / "state.db";
    auto opened = store::Database::open(db);
    if (!opened || !store::migrate(*opened)) std::abort();
    auto s = HistoryStore::open(db);
    if (!s) std::abort();
    HistorySources sources;
    sources.gpus = [this] {
      gpu::InventoryReport r;
      gpu::GpuDevice d;
      d.index = 0;
      d.memory_total_bytes = 1000;
      d.memory_used_bytes = used;
      d.utilization_percent = 50;
      r.devices = {d};
      return r;
    };
    sources.traffic = [this] { return std::vector<PeerTraffic>{{"PEERKEY", received, 0}}; };
    sources.peer_names = [] { return std::map<std::string, std::string>{{"PEERKEY", "studio"}}; };
    // Everything on one thread: the loop is also the blocking executor.
    service = std::make_unique<HistoryService>(io.get_executor(), io.get_executor(), clock, std::move(*s),
                                               std::move(sources), settings);
    service->add_routes(router);
  }
  ~Fixture() { service->stop(); }
  void advance(std::chrono::seconds d) {
    for (auto t = 0s; t < d; t += 1s) {
      clock.advance(1s);
      io.poll();
    }
  }
  json get(const std::string& query) {
    api::Request req;
    req.method = "GET";
    req.path = "/v1/history";
    req.query = query;
    std::optional<api::Response> got;
    router.dispatch(req, [&](api::Response r) { got = std::move(r); });
    while (!got && io.poll() > 0) {
    }
    if (!got) return {{"no_answer", true}};
    json j = json::parse(got->body, nullptr, false);
    j["http_status"] = got->status;
    return j;
  }
  static const json* find(const json& body, const std::string& name) {
    for (const auto& s : body["series"]) {
      if (s["name"] == name) return &s;
    }
    return nullptr;
  }

  testing::TempDir dir;
  std::string db;
  boost::asio::io_context io;
  // poll() must not stop the loop when it runs out of work for a moment.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  testing::ManualLoopTimers clock;
  api::Router router;
  std::unique_ptr<HistoryService> service;
  uint64_t used = 100, received = 0;
};

TEST(HistoryService, SamplesEveryIntervalAndServesTheSeriesByNameWithRates) {
  HistorySettings settings;
  settings.interval = 10s;
  Fixture f(settings);
  ASSERT_TRUE(f.service->start());
  f.io.poll();
  for (int i = 0; i < 5; ++i) {
    f.used += 100;
    f.received += 10'000;  // 1,000 bytes/s over each 10 s
    f.advance(10s);
  }
  json summary = f.get("");
  ASSERT_EQ(summary["http_status"], 200) << summary.dump();
  EXPECT_EQ(summary["interval_s"], 10);
  const json* util = Fixture::find(summary, "gpu.0.utilization_percent");
  ASSERT_NE(util, nullptr) << summary.dump();
  EXPECT_EQ((*util)["title"], "GPU 0 utilisation");
  EXPECT_EQ((*util)["unit"], "%");
  EXPECT_EQ((*util)["last"], 50);
  const json* rx = Fixture::find(summary, "peer.PEERKEY.received_bytes_per_s");
  ASSERT_NE(rx, nullptr) << summary.dump();
  EXPECT_NE((*rx)["title"].get<std::string>().find("studio"), std::string::npos);
  EXPECT_DOUBLE_EQ((*rx)["last"].get<double>(), 1000);

  // Six samples (at start and every 10 s), oldest first, the VRAM rising.
  json gpus = f.get("prefix=gpu.&since=0");
  ASSERT_EQ(gpus["http_status"], 200) << gpus.dump();
  const json* vram = Fixture::find(gpus, "gpu.0.memory_used_bytes");
  ASSERT_NE(vram, nullptr) << gpus.dump();
  ASSERT_EQ((*vram)["points"].size(), 6u) << vram->dump();
  EXPECT_EQ((*vram)["points"][0][1], 100);
  EXPECT_EQ((*vram)["points"][5][1], 600);
  EXPECT_DOUBLE_EQ((*vram)["points"][5][0].get<double>() - (*vram)["points"][0][0].get<double>(), 50);
  EXPECT_EQ(Fixture::find(gpus, "peer.PEERKEY.received_bytes_per_s"), nullptr) << "the prefix chose the GPU series";

  // Exact names, the comma as a browser encodes it; thinned to what was asked.
  json two = f.get("series=gpu.0.memory_used_bytes%2Cgpu.0.utilization_percent&since=0&points=3");
  ASSERT_EQ(two["series"].size(), 2u) << two.dump();
  EXPECT_EQ(two["series"][0]["points"].size(), 3u);
  // Only what is newer than `since`.
  double last_at = (*vram)["points"][5][0].get<double>();
  json recent = f.get("prefix=gpu.0.memory&since=" + std::to_string(int64_t(last_at) - 15));
  EXPECT_EQ(Fixture::find(recent, "gpu.0.memory_used_bytes")->at("points").size(), 2u) << recent.dump();

  for (const char* bad : {"prefix=gpu.&since=x", "prefix=gpu.&points=0", "prefix=gpu.&points=999999"}) {
    json b = f.get(bad);
    EXPECT_EQ(b["http_status"], 400) << bad << " " << b.dump();
    EXPECT_NE(b.dump().find("not a number"), std::string::npos) << b.dump();
  }
}

TEST(HistoryService, OldSamplesArePrunedAndTheTableKeepsUnderItsCap) {
  HistorySettings settings;
  settings.interval = 60s;
  settings.keep = 1h;
  Fixture f(settings);
  ASSERT_TRUE(f.service->start());
  f.io.poll();
  f.advance(3h);
  json gpus = f.get("prefix=gpu.0.utilization&since=0&points=2000");
  const json* util = Fixture::find(gpus, "gpu.0.utilization_percent");
  ASSERT_NE(util, nullptr) << gpus.dump();
  double newest = util->at("points").back()[0].get<double>();
  double oldest = util->at("points").front()[0].get<double>();
  // Pruned every 30 samples: nothing older than keep plus those 30 minutes.
  EXPECT_LE(newest - oldest, 3600 + 30 * 60) << util->dump();
  EXPECT_GT(newest - oldest, 3600 - 60);

  // The row cap, whatever the age: the newest rows stay.
  auto s = HistoryStore::open(f.db);
  ASSERT_TRUE(s);
  auto removed = (*s)->prune(0, 10);
  ASSERT_TRUE(removed) << removed.error().to_string();
  EXPECT_GT(*removed, 0);
  auto latest = (*s)->latest();
  ASSERT_TRUE(latest);
  size_t rows = 0;
  for (const auto& l : *latest) {
    auto pts = (*s)->points(l.series, 0, 1'000'000);
    ASSERT_TRUE(pts);
    rows += pts->size();
    EXPECT_DOUBLE_EQ(pts->back().at_s, newest) << l.series;
  }
  EXPECT_EQ(rows, 10u);
}

}  // namespace
}  // namespace yonder::history
