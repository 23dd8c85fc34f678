// A TEST DOUBLE of LoopTimers (base/loop_timers.h) whose time moves only
// when the test calls advance(): the due timers fire then, in deadline
// order (ties in the order they were set), each with the clock standing at
// its own deadline, on the calling thread, which must be the service's
// event loop thread (a simulation's or a unit test's one thread).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "base/loop_timers.h"

namespace yonder::testing {

class ManualLoopTimers final : public LoopTimers {
 public:
  explicit ManualLoopTimers(TimePoint wall_start = TimePoint(std::chrono::hours(24 * 365 * 56)),
                            SteadyTime steady_start = SteadyTime(std::chrono::hours(1)))
      : wall_(wall_start), steady_(steady_start) {}

  TimePoint now() const override { return wall_; }
  SteadyTime steady_now() const override { return steady_; }
  std::unique_ptr<Timer> at(SteadyTime when, std::function<void()> fire) override {
    auto key = std::make_pair(when, next_++);
    auto fn = std::make_shared<std::function<void()>>(std::move(fire));
    pending_.emplace(key, fn);
    return std::make_unique<Pending>(*this, key, alive_);
  }

  // Moves time forward by `d`, firing every timer that comes due on the way
  // (including timers those set, if they come due within `d`).
  void advance(std::chrono::nanoseconds d) {
    SteadyTime target = steady_ + std::chrono::duration_cast<SteadyTime::duration>(d);
    while (!pending_.empty() && pending_.begin()->first.first <= target) {
      auto it = pending_.begin();
      move_to(it->first.first);
      auto fire = it->second;
      pending_.erase(it);
      (*fire)();
    }
    move_to(target);
  }
  size_t pending() const { return pending_.size(); }

  ~ManualLoopTimers() override { *alive_ = false; }
  ManualLoopTimers(const ManualLoopTimers&) = delete;
  ManualLoopTimers& operator=(const ManualLoopTimers&) = delete;

 private:
  using Key = std::pair<SteadyTime, uint64_t>;
  struct Pending final : Timer {
    Pending(ManualLoopTimers& owner, Key key, std::shared_ptr<bool> alive)
        : owner_(owner), key_(key), alive_(std::move(alive)) {}
    ~Pending() override {
      if (*alive_) owner_.pending_.erase(key_);
    }
    ManualLoopTimers& owner_;
    Key key_;
    std::shared_ptr<bool> alive_;
  };
  void move_to(SteadyTime t) {
    if (t <= steady_) return;
    wall_ += std::chrono::duration_cast<TimePoint::duration>(t - steady_);
    steady_ = t;
  }

  TimePoint wall_;
  SteadyTime steady_;
  uint64_t next_ = 0;
  std::map<Key, std::shared_ptr<std::function<void()>>> pending_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // timers may outlive this object
};

}  // namespace yonder::testing
