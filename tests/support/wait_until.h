// The one way a test waits for a condition that has no event of its own to
// wait on (a file removed by a background sweep, a state read by polling
// an API): checks `ready` until it holds or `timeout` passes. Prefer a real
// event (a future, a log watch, a process's exit) wherever there is one.
#pragma once

#include <chrono>
#include <thread>

namespace yonder::testing {

template <class Ready>
bool wait_until(Ready ready, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace yonder::testing
