// The real LoopTimers on an io_context, and the simulation's test double,
// against the same contract (base/loop_timers.h): a timer fires on the loop
// once its time comes, in deadline order, never inside at(), and never
// after it was destroyed, even when it is destroyed after it came due but
// before the loop ran its handler.
#include "os/asio_loop_timers.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

#include "support/manual_loop_timers.h"

namespace yonder {
namespace {

using namespace std::chrono_literals;

TEST(AsioLoopTimers, FiresInDeadlineOrderAndNotAfterItIsDestroyed) {
  boost::asio::io_context io;
  os::AsioLoopTimers timers(io);
  std::string fired;
  auto late = timers.after(30ms, [&] { fired += "late "; });
  auto early = timers.after(10ms, [&] { fired += "early "; });
  auto dropped = timers.after(5ms, [&] { fired += "dropped "; });
  EXPECT_EQ(fired, "") << "never inside at()";
  dropped.reset();
  io.run_for(1s);
  EXPECT_EQ(fired, "early late ");
}

TEST(AsioLoopTimers, ATimerDestroyedAfterItCameDueDoesNotFire) {
  boost::asio::io_context io;
  os::AsioLoopTimers timers(io);
  bool fired = false;
  auto t = timers.at(timers.steady_now(), [&] { fired = true; });
  // Its time has come, but the loop has not run its handler yet.
  t.reset();
  io.run_for(100ms);
  EXPECT_FALSE(fired);
}

TEST(ManualLoopTimers, FiresOnlyWhenMovedEachAtItsOwnTimeInOrder) {
  testing::ManualLoopTimers timers;
  auto start = timers.steady_now();
  std::vector<std::chrono::milliseconds> at;
  std::unique_ptr<LoopTimers::Timer> chained;
  auto a = timers.after(20ms, [&] {
    at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(timers.steady_now() - start));
    // Set from a handler, due within the same advance: fires in it too.
    chained = timers.after(5ms, [&] {
      at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(timers.steady_now() - start));
    });
  });
  auto b = timers.after(10ms, [&] {
    at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(timers.steady_now() - start));
  });
  auto c = timers.after(15ms, [&] { at.push_back(-1ms); });
  c.reset();
  EXPECT_TRUE(at.empty());
  timers.advance(100ms);
  EXPECT_EQ(at, (std::vector<std::chrono::milliseconds>{10ms, 20ms, 25ms}));
  EXPECT_EQ(timers.steady_now() - start, 100ms);
  EXPECT_EQ(timers.pending(), 0u);
}

}  // namespace
}  // namespace yonder
