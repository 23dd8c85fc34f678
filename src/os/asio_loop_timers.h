// The real LoopTimers (base/loop_timers.h): the system clocks, and Asio
// steady timers on one io_context.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "base/loop_timers.h"

namespace yonder::os {

class AsioLoopTimers final : public LoopTimers {
 public:
  explicit AsioLoopTimers(boost::asio::io_context& io) : io_(io) {}

  TimePoint now() const override { return std::chrono::system_clock::now(); }
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  std::unique_ptr<Timer> at(SteadyTime when, std::function<void()> fire) override {
    auto timer = std::make_unique<Pending>(io_);
    timer->timer.expires_at(when);
    // The flag, not the error code, says whether it was cancelled: a timer
    // destroyed after it expired but before its handler ran must not fire.
    timer->timer.async_wait([live = timer->live, fire = std::move(fire)](boost::system::error_code ec) {
      if (!ec && *live) fire();
    });
    return timer;
  }

 private:
  struct Pending final : Timer {
    explicit Pending(boost::asio::io_context& io) : timer(io) {}
    ~Pending() override {
      *live = false;
      timer.cancel();
    }
    boost::asio::steady_timer timer;
    std::shared_ptr<bool> live = std::make_shared<bool>(true);
  };
  boost::asio::io_context& io_;
};

}  // namespace yonder::os
