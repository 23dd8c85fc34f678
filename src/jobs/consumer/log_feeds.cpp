#include "jobs/consumer/log_feeds.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <list>

#include <spdlog/spdlog.h>

#include "jobs/consumer/log_feed_core.h"
#include "net/link/link_service.h"
#include "net/link/message.h"

namespace yonder::jobs::consumer {
namespace asio = boost::asio;

namespace {
// Pushed replies kept per job (each is at most ~160 KiB of JSON).
constexpr size_t kMaxHeldBytes = 4 * 1024 * 1024;
// A feed nobody polled for this long is closed.
constexpr std::chrono::seconds kIdle{60};
// A provider that does not know run.logs.follow is asked by run.logs
// alone for this long before the feed is tried again (it may be upgraded).
constexpr std::chrono::minutes kNoFollowFor{10};
}  // namespace

struct LogFeeds::Feed {
  Feed(asio::io_context& io, std::string job, uint64_t start, const reach::Peers::Target& t)
      : job_id(std::move(job)), provider(t), core(start, kMaxHeldBytes), idle(io) {}
  struct Waiter {
    explicit Waiter(asio::io_context& io) : timer(io) {}
    uint64_t offset = 0;
    Answer answer;
    std::function<void()> fallback;
    asio::steady_timer timer;
  };
  std::string job_id;
  reach::Peers::Target provider;
  LogFeedCore core;
  link::MessageReader reader;
  std::shared_ptr<link::Tunnel> tunnel;
  bool opening = true;
  bool dead = false;
  bool paused = false;
  std::list<std::shared_ptr<Waiter>> waiters;
  asio::steady_timer idle;
};

LogFeeds::LogFeeds(asio::io_context& io, reach::Peers& link) : io_(io), link_(link) {}

LogFeeds::~LogFeeds() { stop(); }

// Waiting polls are dropped, not answered: the API server is stopping too.
void LogFeeds::stop() {
  auto feeds = std::move(feeds_);
  feeds_.clear();
  for (auto& [job, feed] : feeds) {
    for (auto& w : feed->waiters) w->timer.cancel();
    feed->waiters.clear();
    feed->idle.cancel();
    kill(feed, "the daemon is stopping");
  }
}

void LogFeeds::poll(const reach::Peers::Target& provider, const std::string& job_id, uint64_t offset,
                    std::chrono::milliseconds wait, Answer answer, std::function<void()> fallback) {
  auto no = no_follow_.find(provider.node_id);
  if (no != no_follow_.end()) {
    if (std::chrono::steady_clock::now() < no->second) return fallback();
    no_follow_.erase(no);
  }
  std::shared_ptr<Feed> feed;
  if (auto it = feeds_.find(job_id); it != feeds_.end()) feed = it->second;
  if (feed) {
    auto p = feed->core.poll(offset);
    if (p.verdict == LogFeedCore::Verdict::kAnswer) {
      arm_idle(feed);
      if (feed->paused && !feed->core.full() && feed->tunnel && !feed->dead) {
        feed->paused = false;
        feed->tunnel->resume();
      }
      return answer(std::move(p.reply));
    }
    bool waitable = p.verdict == LogFeedCore::Verdict::kWait && !feed->dead;
    if (!waitable && !feed->dead && offset < feed->core.base()) {
      return fallback();  // behind what is kept (another follower, further back): the feed goes on for the others
    }
    if (!waitable) {
      kill(feed, "a follower asked for offset " + std::to_string(offset));  // dead, or asked elsewhere: start again
      feed = nullptr;
    }
  }
  if (!feed) {
    feed = std::make_shared<Feed>(io_, job_id, offset, provider);
    feeds_[job_id] = feed;
    open(feed);
  }
  arm_idle(feed);
  auto w = std::make_shared<Feed::Waiter>(io_);
  w->offset = offset;
  w->answer = std::move(answer);
  w->fallback = std::move(fallback);
  feed->waiters.push_back(w);
  w->timer.expires_after(wait);
  std::weak_ptr<Feed> weak = feed;
  w->timer.async_wait([weak, w](boost::system::error_code ec) {
    auto f = weak.lock();
    if (ec || !f) return;
    auto it = std::find(f->waiters.begin(), f->waiters.end(), w);
    if (it == f->waiters.end()) return;
    f->waiters.erase(it);
    // Nothing new within the wait: an empty answer, as run.logs gives. Unless
    // the stream is not up yet: then run.logs answers (or names a provider
    // that does not).
    if (f->opening || f->dead) return w->fallback();
    w->answer(nlohmann::json{{"records", nlohmann::json::array()}, {"next_offset", w->offset}, {"ended", false}});
  });
}

void LogFeeds::arm_idle(const std::shared_ptr<Feed>& feed) {
  feed->idle.expires_after(kIdle);
  std::weak_ptr<Feed> weak = feed;
  feed->idle.async_wait([this, weak](boost::system::error_code ec) {
    auto f = weak.lock();
    if (ec || !f) return;
    auto it = feeds_.find(f->job_id);
    if (it == feeds_.end() || it->second != f) return;
    feeds_.erase(it);
    kill(f, "nobody followed the log for " + std::to_string(kIdle.count()) + " s");
  });
}

void LogFeeds::open(const std::shared_ptr<Feed>& feed) {
  nlohmann::json params = {{"job_id", feed->job_id}, {"offset", feed->core.end()}};
  spdlog::info("logs: following job {} from offset {} over a stream", feed->job_id, feed->core.end());
  link_.service().open_tunnel(
      feed->provider.key, feed->provider.addresses, "run.logs.follow", params,
      [this, feed](Result<link::TunnelOpened> r) {
        if (feed->dead) {
          if (r && r->tunnel) r->tunnel->reset("the log stream was given up");
          return;
        }
        feed->opening = false;
        if (!r) {
          if (r.error().message().find("does not support") != std::string::npos) {
            no_follow_[feed->provider.node_id] = std::chrono::steady_clock::now() + kNoFollowFor;
          }
          return kill(feed, r.error().message());
        }
        if (!r->tunnel) return kill(feed, "the log stream closed as it opened");
        feed->tunnel = std::move(r->tunnel);
        std::weak_ptr<Feed> weak = feed;
        link::Tunnel::Handlers h;
        h.data = [this, weak](Bytes b) {
          auto f = weak.lock();
          if (!f || f->dead) return;
          f->reader.feed(b);
          for (;;) {
            size_t before = f->reader.buffered();
            auto m = f->reader.next();
            if (!m) return kill(f, "the provider's log stream broke: " + m.error().message());
            if (!*m) break;
            if (Status s = f->core.push(**m, before - f->reader.buffered()); !s) {
              return kill(f, s.error().message());
            }
          }
          wake(f);
          if (f->dead) return;
          if (f->core.full()) {
            f->paused = true;  // resumed by the poll that reads some
          } else {
            f->tunnel->resume();
          }
        };
        h.eof = [this, weak] {
          auto f = weak.lock();
          if (!f || f->dead) return;
          kill(f, f->core.ended() ? "the job ended" : "the provider closed the log stream");
        };
        h.drained = [] {};
        h.ended = [this, weak](const std::string& why) {
          auto f = weak.lock();
          if (f && !f->dead) kill(f, why);
        };
        feed->tunnel->start(std::move(h));
      });
}

// Answers every waiter the feed can answer now; with the feed dead, hands
// the rest to run.logs.
void LogFeeds::wake(const std::shared_ptr<Feed>& feed) {
  auto waiters = feed->waiters;
  for (auto& w : waiters) {
    auto p = feed->core.poll(w->offset);
    if (p.verdict == LogFeedCore::Verdict::kWait && !feed->dead) continue;
    feed->waiters.remove(w);
    w->timer.cancel();
    if (p.verdict == LogFeedCore::Verdict::kAnswer) {
      w->answer(std::move(p.reply));
    } else {
      w->fallback();
    }
  }
}

void LogFeeds::kill(const std::shared_ptr<Feed>& feed, const std::string& why) {
  if (feed->dead) return;
  feed->dead = true;
  spdlog::debug("logs: the stream of job {} ended: {}", feed->job_id, why);
  if (feed->tunnel) {
    if (feed->core.ended()) {
      feed->tunnel->close();  // the provider said all: a clean end both ways
    } else {
      feed->tunnel->reset(why);
    }
    feed->tunnel = nullptr;
  }
  wake(feed);  // what the feed holds still answers; the rest goes to run.logs
  if (feed->core.ended()) return;  // kept for the polls that read its end, until idle
  auto it = feeds_.find(feed->job_id);
  if (it != feeds_.end() && it->second == feed) {
    feed->idle.cancel();
    feeds_.erase(it);
  }
}

}  // namespace yonder::jobs::consumer
