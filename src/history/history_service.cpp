#include "history/history_service.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "api/server.h"

namespace yonder::history {
namespace asio = boost::asio;

namespace {

constexpr int64_t kDefaultPoints = 300;
constexpr int64_t kMaxPoints = 2000;
constexpr size_t kMaxSeriesAsked = 64;
// Prune once in this many samples: a DELETE over the time index each
// sample would cost more than the rows it finds.
constexpr int kPruneEvery = 30;

double seconds_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// %XX in a query value (a browser's URLSearchParams writes "," as %2C).
std::string percent_decoded(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    unsigned v = 0;
    if (raw[i] == '%' && i + 2 < raw.size() &&
        std::from_chars(raw.data() + i + 1, raw.data() + i + 3, v, 16).ptr == raw.data() + i + 3) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(raw[i] == '+' ? ' ' : raw[i]);
    }
  }
  return out;
}

Result<double> number_param(const std::map<std::string, std::string>& q, const std::string& key, double fallback,
                            double min, double max) {
  auto it = q.find(key);
  if (it == q.end() || it->second.empty()) return fallback;
  double v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || v < min || v > max) {
    return make_error(ErrorCode::kInvalidArgument, "history: " + key + "=" + it->second.substr(0, 40) +
                                                       " is not a number from " + std::to_string(int64_t(min)) +
                                                       " to " + std::to_string(int64_t(max)));
  }
  return v;
}

}  // namespace

// What the worker pool touches: the store and the counters between samples.
struct HistoryService::Shared {
  std::mutex mutex;
  std::unique_ptr<HistoryStore> store;
  RateMeter traffic_rates, job_cpu;
  int samples = 0;
};

HistoryService::HistoryService(asio::any_io_executor loop, asio::any_io_executor blocking, LoopTimers& timers,
                               std::unique_ptr<HistoryStore> store, HistorySources sources, HistorySettings settings)
    : loop_(std::move(loop)),
      blocking_(std::move(blocking)),
      timers_(timers),
      sources_(std::move(sources)),
      settings_(settings),
      shared_(std::make_shared<Shared>()) {
  shared_->store = std::move(store);
}

HistoryService::~HistoryService() = default;

Status HistoryService::start() {
  sample_now();
  return ok_status();
}

void HistoryService::stop() {
  stopped_ = true;
  timer_.reset();
}

void HistoryService::set_interval(std::chrono::seconds interval) {
  settings_.interval = std::max(std::chrono::seconds(1), interval);
  if (timer_) schedule();  // replaces the pending timer (destroying it cancels it)
}

void HistoryService::schedule() {
  if (stopped_) return;
  timer_ = timers_.after(settings_.interval, [this] { sample_now(); });
}

void HistoryService::sample_now(std::function<void(Status)> done) {
  double now_s = seconds_of(timers_.now());
  std::vector<PeerTraffic> traffic = sources_.traffic ? sources_.traffic() : std::vector<PeerTraffic>{};
  asio::post(blocking_, [this, shared = shared_, now_s, traffic = std::move(traffic), done = std::move(done)]() mutable {
    std::vector<Sample> samples;
    if (sources_.gpus) samples = gpu_samples(sources_.gpus());
    std::vector<JobUsage> jobs = sources_.jobs ? sources_.jobs() : std::vector<JobUsage>{};
    Status st = ok_status();
    {
      std::lock_guard lock(shared->mutex);
      for (auto& s : traffic_samples(now_s, traffic, shared->traffic_rates)) samples.push_back(std::move(s));
      for (auto& s : job_samples(jobs, shared->job_cpu)) samples.push_back(std::move(s));
      st = shared->store->record(now_s, samples);
      if (st && ++shared->samples % kPruneEvery == 1) {
        auto pruned = shared->store->prune(keep_after(now_s, double(settings_.keep.count())), settings_.max_rows);
        if (!pruned) st = std::move(pruned).error();
      }
    }
    asio::post(loop_, [this, st = std::move(st), done = std::move(done)]() mutable {
      std::string failure = st ? "" : st.error().to_string();
      if (failure != last_failure_ && !failure.empty()) {
        spdlog::warn("history: a sample was not stored (the dashboard's charts have a gap): {}", failure);
      }
      last_failure_ = failure;
      if (done) done(st);
      schedule();
    });
  });
}

void HistoryService::add_routes(api::Router& router) {
  router.add("GET", "/v1/history", [this](const api::Request& req, api::Reply reply) {
    auto q = api::parse_query(req.query);
    double now_s = seconds_of(timers_.now());
    auto since = number_param(q, "since", now_s - 3600, 0, 1e11);
    auto points = number_param(q, "points", kDefaultPoints, 1, kMaxPoints);
    if (!since) return reply(api::Response::error(since.error()));
    if (!points) return reply(api::Response::error(points.error()));
    std::string prefix = q.contains("prefix") ? percent_decoded(q["prefix"]) : "";
    std::vector<std::string> asked;
    if (q.contains("series")) {
      std::string list = percent_decoded(q["series"]);
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        std::string one = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!one.empty()) asked.push_back(std::move(one));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      if (asked.size() > kMaxSeriesAsked) {
        return reply(api::Response::error(make_error(
            ErrorCode::kInvalidArgument, "history: at most " + std::to_string(kMaxSeriesAsked) +
                                             " series at once; ask by prefix (prefix=gpu.) instead")));
      }
    }
    bool summary = prefix.empty() && asked.empty();
    auto names = sources_.peer_names ? sources_.peer_names() : std::map<std::string, std::string>{};
    nlohmann::json head = {{"interval_s", settings_.interval.count()}, {"keep_s", settings_.keep.count()}};
    asio::post(blocking_, [this, shared = shared_, summary, prefix, asked, since = *since,
                           limit = static_cast<size_t>(*points), names = std::move(names), head = std::move(head),
                           reply = std::move(reply)]() mutable {
      Result<nlohmann::json> out = [&]() -> Result<nlohmann::json> {
        std::lock_guard lock(shared->mutex);
        auto latest = shared->store->latest();
        if (!latest) return std::move(latest).error();
        nlohmann::json series = nlohmann::json::array();
        for (const auto& l : *latest) {
          auto info = series_info(l.series, names);
          if (!info) continue;  // a name this version does not know
          bool wanted = summary || (!prefix.empty() && l.series.starts_with(prefix)) ||
                        std::find(asked.begin(), asked.end(), l.series) != asked.end();
          if (!wanted) continue;
          nlohmann::json one = {{"name", l.series}, {"title", info->title}, {"unit", info->unit}};
          if (summary) {
            one["last"] = l.last.value;
            one["last_at"] = l.last.at_s;
          } else {
            // Every stored point since then, thinned to what was asked.
            auto all = shared->store->points(l.series, since, 1'000'000);
            if (!all) return std::move(all).error();
            nlohmann::json pts = nlohmann::json::array();
            for (const auto& p : downsample(*all, limit)) pts.push_back({p.at_s, p.value});
            one["points"] = std::move(pts);
          }
          series.push_back(std::move(one));
        }
        head["series"] = std::move(series);
        return head;
      }();
      asio::post(loop_, [out = std::move(out), reply = std::move(reply)] {
        reply(out ? api::Response::json(200, *out) : api::Response::error(out.error()));
      });
    });
  });
}

}  // namespace yonder::history
