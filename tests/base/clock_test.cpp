// SteppedClock (base/clock.h): a manual clock that a test moves while a
// service's threads read it and sleep on it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/clock.h"

namespace yonder {
namespace {

using namespace std::chrono_literals;

TEST(SteppedClock, AdvanceMovesBothFacesAndCallsEverySubscriberUntilItUnsubscribes) {
  SteppedClock clock(TimePoint(1000s));
  auto steady0 = clock.steady_now();
  int calls = 0;
  auto sub = clock.on_moved([&] { ++calls; });
  clock.advance(5s);
  EXPECT_EQ(clock.now(), TimePoint(1005s));
  EXPECT_EQ(clock.steady_now() - steady0, 5s);
  EXPECT_EQ(calls, 1);
  clock.advance(-3s);  // never backwards; subscribers are still told
  EXPECT_EQ(clock.now(), TimePoint(1005s));
  EXPECT_EQ(calls, 2);
  sub.reset();
  clock.advance(1s);
  EXPECT_EQ(calls, 2);
}

// A sleeper that waits for a deadline wakes when the clock is moved past it,
// with no real time to count: the pattern a service's watchdog follows.
TEST(SteppedClock, ASleeperWakesWhenTheClockIsMovedPastItsDeadline) {
  SteppedClock clock(TimePoint(0s));
  std::mutex m;
  std::condition_variable cv;
  auto sub = clock.on_moved([&] {
    std::lock_guard lock(m);
    cv.notify_all();
  });
  const auto deadline = clock.steady_now() + 60s;
  std::atomic<bool> waiting{false}, woke{false};
  std::thread sleeper([&] {
    std::unique_lock lock(m);
    waiting = true;
    while (clock.steady_now() < deadline) clock.wait_until(cv, lock, deadline);
    woke = true;
  });
  // Until it waits, moving the clock could not show anything.
  while (!waiting) std::this_thread::yield();
  clock.advance(30s);
  EXPECT_FALSE(woke.load());  // not yet its deadline (it went back to sleep or never woke)
  clock.advance(30s);
  sleeper.join();  // returns only because the clock reached the deadline
  EXPECT_TRUE(woke.load());
}

TEST(RealClock, ItsWaitReturnsAtTheDeadline) {
  WaitableClock& clock = real_clock();
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock lock(m);
  auto deadline = clock.steady_now() + 10ms;
  while (clock.steady_now() < deadline) clock.wait_until(cv, lock, deadline);
  EXPECT_GE(clock.steady_now(), deadline);
}

}  // namespace
}  // namespace yonder
