// Time for a service that lives on an event loop: the clock it decides by
// and the timers it sleeps on, as one injected interface, so the same
// service runs on the daemon's loop in real time and in a simulation whose
// time moves only when the test says so.
//
// The real one is os/asio_loop_timers.h (Asio's steady timers on the
// daemon's io_context); the test double is tests/support/manual_loop_timers.h.
//
// Contract: `fire` runs on the service's event loop, never inside at(), and
// never after the Timer that at() returned is destroyed (destroying it is
// how a timer is cancelled). Not thread-safe: event loop only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "base/clock.h"

namespace yonder {

class LoopTimers : public Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // A pending timer; destroying it cancels it.
  class Timer {
   public:
    virtual ~Timer() = default;
  };

  // The steady face, for deadlines (never jumps with the wall clock);
  // Clock::now() is the wall face, for timestamps.
  virtual SteadyTime steady_now() const = 0;
  // Runs `fire` on the loop once steady_now() reaches `when`.
  [[nodiscard]] virtual std::unique_ptr<Timer> at(SteadyTime when, std::function<void()> fire) = 0;
  [[nodiscard]] std::unique_ptr<Timer> after(std::chrono::nanoseconds d, std::function<void()> fire) {
    return at(steady_now() + std::chrono::duration_cast<SteadyTime::duration>(d), std::move(fire));
  }
};

}  // namespace yonder
