// Following a job's log over one pushed stream instead of one long poll per
// reply. A follower (`yonder logs -f`, `yonder run`, the dashboard) still
// long-polls this daemon by offset; the daemon keeps, per job, a tunnel
// `run.logs.follow` on which the provider pushes each run.logs reply as
// soon as the log grows, so a fast log is not held to one reply per round
// trip to the provider (log_feed_core.h keeps what was pushed).
//
// Whatever the feed cannot answer goes to run.logs as before (`fallback`):
// an offset it does not hold, a provider that refuses the tunnel or is
// older than it, a feed that broke or ended, and a poll that timed out
// before the tunnel opened (run.logs then names a provider that does not
// answer, as it always did). So resuming by offset is never lost.
//
// Event loop only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}

namespace yonder::jobs::consumer {

class LogFeeds {
 public:
  using Answer = std::function<void(Result<nlohmann::json>)>;
  LogFeeds(boost::asio::io_context& io, reach::Peers& link);
  ~LogFeeds();
  LogFeeds(const LogFeeds&) = delete;
  LogFeeds& operator=(const LogFeeds&) = delete;

  // A follower's poll of job `job_id` on `provider` at `offset`, waiting up
  // to `wait` for records: answered from the job's feed (opened now if
  // there is none that can serve it), or handed to `fallback`.
  void poll(const reach::Peers::Target& provider, const std::string& job_id, uint64_t offset,
            std::chrono::milliseconds wait, Answer answer, std::function<void()> fallback);
  void stop();

  struct Feed;

 private:
  void open(const std::shared_ptr<Feed>& feed);
  void arm_idle(const std::shared_ptr<Feed>& feed);
  void kill(const std::shared_ptr<Feed>& feed, const std::string& why);
  void wake(const std::shared_ptr<Feed>& feed);

  boost::asio::io_context& io_;
  reach::Peers& link_;
  std::unordered_map<std::string, std::shared_ptr<Feed>> feeds_;  // by job id
  // Providers that do not know run.logs.follow, until when run.logs alone is asked.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> no_follow_;
};

}  // namespace yonder::jobs::consumer
