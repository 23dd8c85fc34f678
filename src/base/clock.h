// Time as an injected interface, so protocol cores and tests never read the
// real clock directly. SystemClock is the real one; ManualClock is for tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace yonder {

using TimePoint = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (for expiry, audit timestamps).
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
};

// A clock that only moves when told to. Not thread-safe: one test thread.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(std::chrono::nanoseconds d) { now_ += d; }

 private:
  TimePoint now_;
};

// The clock of a service that sleeps as well as reads the time: the steady
// face for deadlines and timers (it never jumps with the wall clock), the
// wall face (now()) for timestamps, and a wait that ends when the steady
// face reaches a deadline. RealClock is the real one; SteppedClock moves
// only when a test says so, and wakes the service's sleepers when it does.
//
// How a manual clock wakes a sleeper without a lost wakeup: the service
// subscribes with on_moved() a callback that takes the mutex its sleepers
// hold and notifies their condition variable. A sleeper reads the time and
// waits under that mutex; the clock moves first and calls the callback
// after, so the sleeper either sees the new time or is already waiting
// when it is notified.
class WaitableClock : public Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // Unregisters its callback when destroyed, waiting for a call of it in
  // progress to return.
  class Subscription {
   public:
    virtual ~Subscription() = default;
  };

  virtual SteadyTime steady_now() const = 0;
  // Called with `lock` held on the mutex that guards the caller's state:
  // sleeps on `cv` until the steady face reaches `deadline` (max(): no
  // deadline) or `cv` is notified. May return early; callers re-check
  // their state, as with any condition variable.
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          SteadyTime deadline) const = 0;
  // Calls `moved` each time the clock jumps (SteppedClock::advance), on the
  // thread that moved it, holding none of the clock's time; the real clock
  // never calls it. Destroy the subscription before what `moved` touches,
  // and never while holding a lock `moved` takes.
  [[nodiscard]] virtual std::unique_ptr<Subscription> on_moved(std::function<void()> moved) = 0;
};

class RealClock final : public WaitableClock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime deadline) const override {
    if (deadline == SteadyTime::max()) {
      cv.wait(lock);
    } else {
      cv.wait_until(lock, deadline);
    }
  }
  std::unique_ptr<Subscription> on_moved(std::function<void()>) override { return std::make_unique<Subscription>(); }
};

// The process's real WaitableClock (stateless; shared by every service
// that is not handed another).
inline WaitableClock& real_clock() {
  static RealClock clock;
  return clock;
}

// A WaitableClock that moves only when advance() is called; both faces move
// together. Thread-safe, unlike ManualClock: a test thread advances it while
// the service's threads read it and sleep on it. Its sleepers do not count
// real time at all: they wake when it moves (through their subscription)
// or when they are notified for another reason.
class SteppedClock final : public WaitableClock {
 public:
  explicit SteppedClock(TimePoint wall_start, SteadyTime steady_start = SteadyTime(std::chrono::hours(1)))
      : wall_(wall_start), steady_(steady_start) {}

  TimePoint now() const override {
    std::lock_guard lock(time_mutex_);
    return wall_;
  }
  SteadyTime steady_now() const override {
    std::lock_guard lock(time_mutex_);
    return steady_;
  }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime deadline) const override {
    if (steady_now() < deadline) cv.wait(lock);
  }
  std::unique_ptr<Subscription> on_moved(std::function<void()> moved) override {
    std::lock_guard lock(subscribers_mutex_);
    uint64_t id = next_subscriber_++;
    subscribers_.emplace(id, std::move(moved));
    return std::make_unique<Registration>(*this, id);
  }

  // Moves both faces by `d` (negative: not at all), then calls every
  // subscriber. Call it holding no lock a subscriber takes.
  void advance(std::chrono::nanoseconds d) {
    if (d > std::chrono::nanoseconds(0)) {
      std::lock_guard lock(time_mutex_);
      wall_ += std::chrono::duration_cast<TimePoint::duration>(d);
      steady_ += std::chrono::duration_cast<SteadyTime::duration>(d);
    }
    std::lock_guard lock(subscribers_mutex_);
    for (auto& [_, moved] : subscribers_) moved();
  }

 private:
  class Registration final : public Subscription {
   public:
    Registration(SteppedClock& clock, uint64_t id) : clock_(clock), id_(id) {}
    ~Registration() override {
      std::lock_guard lock(clock_.subscribers_mutex_);
      clock_.subscribers_.erase(id_);
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    SteppedClock& clock_;
    uint64_t id_;
  };

  mutable std::mutex time_mutex_;  // guards wall_ and steady_
  TimePoint wall_;
  SteadyTime steady_;
  std::mutex subscribers_mutex_;  // guards the two below; held while calling subscribers
  std::map<uint64_t, std::function<void()>> subscribers_;
  uint64_t next_subscriber_ = 0;
};

inline int64_t unix_seconds(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// The real clock's Unix time, for the stores that stamp rows (created_at,
// updated_at); code that decides by time takes a Clock instead.
inline int64_t unix_now_s() { return unix_seconds(std::chrono::system_clock::now()); }
inline int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace yonder
